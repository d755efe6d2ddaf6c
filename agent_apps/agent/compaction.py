"""The summarizer of compaction: one model call through the agent's own provider.

It asks the model once (:func:`~.one_shot.one_shot`), with its own prompt and the older
messages as the task. Any provider can therefore play it, the offline ``agent-scripted`` included:
``model.compaction.model`` overrides model keys for this call (a cheaper ``model_id``;
for agent-scripted, the ``script`` whose first turn is the summary).

The model answers with one JSON object, ``{"summary": ..., "facts": [...]}``; an answer
that is not JSON is taken whole as the summary, with no facts.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import _json
from ..host_files import check_host_file, open_regular
from ..state.memory import MAX_MEMORY_BYTES
from ..state.window import Summary
from ..tools import path_policy
from .one_shot import one_shot

if TYPE_CHECKING:
    from ..context import Context
    from ..state.messages import Message

__all__ = ["SUMMARY_PROMPT", "Summarizer", "flush_facts", "transcript"]

SUMMARY_PROMPT = """\
You compact the earlier part of a conversation between a user and an AI agent (which acts by
running Python code), so that the agent can go on with less context.

Answer with one JSON object and nothing else:

{"summary": "...", "facts": ["...", "..."]}

- summary: one compact paragraph: what the user asked, what the agent did and found,
  results, decisions and anything still open. Keep names, numbers, paths and ids exact.
- facts: durable facts worth remembering beyond this conversation (the user's preferences,
  names, paths, decisions), each one short sentence; [] when there are none.

Do not call any tool.
"""

_RESULT_CHARS = 2000  # of one tool result in the transcript
_CHARS_PER_TOKEN = 4


class SummaryFailed(Exception):
    """The summarizing call gave nothing usable."""


class Summarizer:
    """``await summarizer(messages, previous_summary) -> Summary`` (raises on failure)."""

    def __init__(self, ctx: Context, provider: str, config: dict[str, Any], *, max_tokens: int) -> None:
        self.ctx = ctx
        self.provider = provider
        overrides = (config.get("compaction") or {}).get("model") or {}
        self.config = {**config, **overrides}
        self.max_chars = max(4000, max_tokens * _CHARS_PER_TOKEN)

    async def __call__(self, messages: list[Message], previous: str | None) -> Summary:
        answer = await one_shot(
            self.ctx,
            self.provider,
            self.config,
            system=SUMMARY_PROMPT,
            user_message=transcript(messages, previous, max_chars=self.max_chars),
            refusal="no tools while summarizing: answer with the JSON object",
        )
        return parse(answer.text)


def parse(text: Any) -> Summary:
    """The model's answer as a :class:`Summary`."""
    if not isinstance(text, str) or not text.strip():
        raise SummaryFailed(f"the model returned no summary ({text!r})")
    body = text.strip()
    start, end = body.find("{"), body.rfind("}")
    if start != -1 and end > start:
        try:  # the model's text: bounded (a reply nested 100,000 deep is text, not a crash)
            data = _json.loads(body[start : end + 1])
        except ValueError:
            data = None
        if isinstance(data, dict) and isinstance(data.get("summary"), str) and data["summary"].strip():
            facts = [str(f).strip() for f in data.get("facts") or () if str(f).strip()]
            return Summary(data["summary"].strip(), facts)
    return Summary(body)


def transcript(messages: list[Message], previous: str | None, *, max_chars: int) -> str:
    """The messages as plain text for the summarizer, newest kept when it is too long."""
    lines = []
    for message in messages:
        role, text = message.get("role"), message.get("text") or ""
        if role == "tool":
            cut = text if len(text) <= _RESULT_CHARS else text[:_RESULT_CHARS] + f" [... {len(text)} characters]"
            lines.append(f"[result{' (error)' if message.get('error') else ''}] {cut}")
            continue
        if text:
            lines.append(f"[{role}] {text}")
        for call in message.get("tool_calls") or ():
            code = call.get("input", {}).get("code") if isinstance(call.get("input"), dict) else None
            lines.append(f"[{role} ran code]\n{code}" if code else f"[{role} called {call.get('name')}]")
    body = "\n\n".join(lines)
    if len(body) > max_chars:
        body = "[... earlier messages cut]\n" + body[-max_chars:]
    head = f"Summary of what came before:\n{previous}\n\n" if previous else ""
    return f"{head}The conversation to summarize:\n\n{body}"


def flush_facts(
    workspace: str | Path, facts: list[str], *, today: datetime.date | None = None, denied: Sequence[str] = ()
) -> Path:
    """Append ``facts`` to the workspace's ``MEMORY.md`` under a dated heading.

    The file is held to what memory retrieval reads (:mod:`agent_apps.host_files`): a
    ``MEMORY.md`` that leads out of the workspace, lies in a denied path (``denied``:
    the path policy's, besides the built-in ones) or is not a regular file is refused
    with :class:`~agent_apps.host_files.HostFileRefused`, and nothing is written."""
    folder = Path(workspace).expanduser()
    if not folder.is_dir():
        raise FileNotFoundError(f"model.workspace {str(folder)!r} is not a folder")
    path = folder / "MEMORY.md"
    try:
        target = check_host_file(path, folder=folder, denied=denied, limit=MAX_MEMORY_BYTES)
    except FileNotFoundError:  # made below (never through a link: the open follows none)
        target = str(path)
    day = (today or datetime.date.today()).isoformat()
    fd = open_regular(target, os.O_RDWR | os.O_APPEND | os.O_CREAT)
    try:
        size = os.fstat(fd).st_size
        tail = os.pread(fd, 2, max(size - 2, 0))
        lead = "" if not tail or tail.endswith(b"\n\n") else ("\n" if tail.endswith(b"\n") else "\n\n")
        text = f"{lead}## Auto-captured -- {day}\n\n" + "".join(f"- {fact}\n" for fact in facts)
        os.write(fd, text.encode("utf-8"))
    finally:
        os.close(fd)
    return path


async def prompt_window(
    ctx: Context,
    *,
    provider: str,
    config: dict[str, Any],
    session: str,
    system: str,
    persist: bool,
) -> tuple[list[Message], dict[str, Any] | None]:
    """The session's prompt window for this agent run, and what compaction did (None
    when nothing was left out)."""
    from ..errors import ConfigError
    from ..state.messages import estimate_text
    from ..state.window import Budget, PromptWindow, compaction_options, compaction_strategy, history_provider

    options = compaction_options(config.get("compaction"))
    window_size = config.get("context_window", 200_000)
    if isinstance(window_size, bool) or not isinstance(window_size, int) or window_size <= 0:
        raise ConfigError(f"model.context_window must be a positive number of tokens, not {window_size!r}")
    budget = Budget(window_size, estimate_text(system), options["reserve"], options["threshold"], options["keep"])
    workspace = config.get("workspace")
    denied = path_policy(ctx).denied_for_files_of(workspace) if workspace else ()
    flushed: list[str] = []
    refused: list[str] = []

    def on_facts(facts: list[str]) -> None:
        if not workspace:
            return
        try:
            flushed.append(str(flush_facts(workspace, facts, denied=denied)))
        except OSError as exc:  # a refused or unwritable MEMORY.md: the facts are in the report
            refused.append(f"{exc}; the facts were not written to it")

    window = PromptWindow(
        history_provider(config.get("history"), ctx.manager.context_manager.state),
        compaction_strategy(options),
        budget,
        summarizer=Summarizer(ctx, provider, config, max_tokens=budget.available),
        stale_turns=options["stale_turns"],
        persist=persist,
        on_facts=on_facts,
    )
    messages = await window.get_prompt_window(session)
    done = window.last
    if done is None or not (done.removed or done.failed):
        return messages, None
    report = done.describe(options["strategy"])
    if flushed:
        report["memory_file"] = flushed[0]
    if refused:
        report["memory_file_refused"] = refused[0]
    return messages, report
