"""Compaction of an agent run's conversation: when the run starts, and during it.

:func:`prompt_window` fits a session's history into the model's context before the
run's first turn (docs/sessions.md). :class:`RunCompaction` does the same during a long
run: an interceptor of its model calls (around_model.py) that, before each call, lets
the strategy compact the conversation the provider sends once it passes the same
threshold (70% of ``context_window - system prompt - reserve``), and sends the
compacted window instead (seed 004's loop). Each compaction is journaled (``k.N``), so
a resumed run sends the same windows without asking the summarizer again.

The summarizer of compaction: one model call through the agent's own provider.

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
from ..errors import ConfigError
from ..host_files import check_host_file, open_regular
from ..state.memory import MAX_MEMORY_BYTES
from ..state.messages import Entry, History, estimate_text, estimate_tokens
from ..state.window import Budget, Compacted, Summary, compaction_options, compaction_strategy
from ..tools import path_policy
from .one_shot import one_shot

if TYPE_CHECKING:
    from ..context import Context
    from ..state.messages import History, Message
    from .run import AgentRun

__all__ = ["SUMMARY_PROMPT", "RunCompaction", "Summarizer", "flush_facts", "prompt_window", "transcript"]

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
    flush: bool = True,
    loaded: History | None = None,
) -> tuple[list[Message], dict[str, Any] | None]:
    """The session's prompt window for this agent run, and what compaction did (None
    when nothing was left out). Without ``persist`` (a run whose history is not kept)
    no summary is stored; without ``flush`` (a run off the record) no facts are
    appended to the workspace's MEMORY.md. ``loaded``: the session's history, read
    already (the store's history provider starts from it)."""
    from ..state.window import PromptWindow, history_provider

    options = compaction_options(config.get("compaction"))
    budget = _budget(config, options, system)
    workspace = config.get("workspace")
    flushed: dict[str, str] = {}  # what the first flush of facts did: its report key and value

    def on_facts(facts: list[str]) -> None:
        if workspace and flush:
            key, value = _flush(ctx, workspace, facts)
            flushed.setdefault(key, value)

    window = PromptWindow(
        history_provider(config.get("history"), ctx.manager.context_manager.state, loaded),
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
    report.update(flushed)
    return messages, report


def _flush(ctx: Context, workspace: str | Path, facts: list[str]) -> tuple[str, str]:
    """Append compaction's facts to the workspace's MEMORY.md under the agent's path
    policy: ``("memory_file", path)``, or ``("memory_file_refused", why)`` for a
    refused or unwritable file (the facts stay in the report)."""
    denied = path_policy(ctx).denied_for_files_of(workspace)
    try:
        return "memory_file", str(flush_facts(workspace, facts, denied=denied))
    except OSError as exc:
        return "memory_file_refused", f"{exc}; the facts were not written to it"


def _budget(config: dict[str, Any], options: dict[str, Any], system: str) -> Budget:
    """The history's budget: ``model.context_window`` (checked) less the system prompt and the reserve."""
    window_size = config.get("context_window", 200_000)
    if isinstance(window_size, bool) or not isinstance(window_size, int) or window_size <= 0:
        raise ConfigError(f"model.context_window must be a positive number of tokens, not {window_size!r}")
    return Budget(window_size, estimate_text(system), options["reserve"], options["threshold"], options["keep"])


class RunCompaction:
    """Compaction during a run: a model-call interceptor (see the module docstring).

    The provider keeps its whole conversation; this keeps how much of its beginning
    (``through`` messages) is replaced, and by what (``head``: the summary message, or
    nothing when the older part was dropped). Each model call is sent ``head`` and the
    rest, compacted again when that passes the threshold. The estimate of the window is
    anchored to the input tokens the provider last reported, as a session's is.
    """

    needs_messages = True
    changes_responses = False

    def __init__(self, run: AgentRun) -> None:
        self.run = run
        config = run.settings.config
        self.options = compaction_options(config.get("compaction"))
        self.strategy = compaction_strategy(self.options)
        _budget(config, self.options, "")  # a bad context_window is refused before the first turn
        self.through = 0
        self.head: list[Message] = []
        self.summary: str | None = None
        self.count = 0
        #: (tokens without the system prompt, messages they cover) the provider last reported
        self._anchor: tuple[int, int] | None = None
        self._sent = self._system = 0
        journal = run.journal
        entries = journal.entries.items() if journal is not None else ()
        #: a resumed run's compactions, in the order they were made
        self._journaled = sorted(
            (entry.body for key, entry in entries if key.startswith("k.")), key=lambda body: int(body["n"])
        )

    async def model_call(self, event: dict[str, Any]) -> dict[str, Any] | None:
        messages = event.get("messages")
        if not isinstance(messages, list):
            return None
        turn = int(event.get("turn") or 0)
        while self._journaled and int(self._journaled[0]["turn"]) <= turn:  # resumed: what it did the first time
            self._take(self._journaled.pop(0))
        if len(messages) < self.through:  # the provider shortened its conversation itself
            self._take({"n": self.count, "through": 0, "head": [], "summary": None})
        system = str(event.get("system") or "")
        budget = _budget(self.run.settings.config, self.options, system)
        self._system = budget.system
        history = self._history(messages)
        result = None
        if history.estimated_tokens() >= budget.trigger:
            result = await self._compact(history, budget)
        if result is not None and result.removed:
            kept = len(history.entries) - result.removed
            head = result.messages[: len(result.messages) - kept]
            summary = result.summary if result.summary is not None else (self.summary if head else None)
            state = {"n": self.count + 1, "turn": turn, "through": self.through + result.removed, "head": head,
                     "summary": summary}  # fmt: skip
            self._take(state)
            await self._record(state, result.describe(self.options["strategy"]), result.facts)
        self._sent = len(messages)
        if not self.through:
            return None
        return {"messages": [*self.head, *messages[self.through :]]}

    async def model_response(self, event: dict[str, Any]) -> dict[str, Any] | None:
        usage = (event.get("response") or {}).get("usage")
        if isinstance(usage, dict) and usage.get("input_tokens") and not usage.get("estimated"):
            total = sum(int(usage.get(k) or 0) for k in ("input_tokens", "cache_read_tokens", "cache_write_tokens"))
            self._anchor = (max(0, total - self._system), self._sent)
        return None

    async def _compact(self, history: History, budget: Budget) -> Compacted | None:
        """Let the strategy compact what came before the last exchange (the model's
        last answer and its results, or the message it is to answer): the model always
        sees what it just did. That exchange counts as part of the fixed prompt."""
        entries = history.entries
        last = max((i for i, entry in enumerate(entries) if entry.role == "assistant"), default=0)
        if last == 0:
            return None
        tail = sum(entry.tokens for entry in entries[last:])
        older = History("run", entries[:last], history.summary, history.summary_through)
        room = Budget(budget.context_window, budget.system + tail, budget.reserve, budget.threshold, budget.keep)
        config = self.run.settings.config
        summarizer = Summarizer(self.run.ctx, self.run.settings.provider, config, max_tokens=room.available)
        result = await self.strategy.compact(older, room, summarizer)
        result.messages += [entry.message for entry in entries[last:]]
        return result

    def _history(self, messages: list[Message]) -> History:
        """The window as the strategy sees it: the messages after ``through``, numbered
        from 1 in the provider's conversation, and the summary that stands for the rest."""
        entries = [
            Entry(index + 1, message, estimate_tokens(message))
            for index, message in enumerate(messages)
            if index >= self.through
        ]
        anchor_tokens, anchor_seq = self._anchor or (None, None)
        return History("run", entries, self.summary, self.through, anchor_tokens, anchor_seq)

    def _take(self, state: dict[str, Any]) -> None:
        self.count = int(state["n"])
        self.through = int(state["through"])
        self.head = list(state["head"])
        self.summary = state.get("summary")
        self._anchor = None  # it measured another window

    async def _record(self, state: dict[str, Any], report: dict[str, Any], facts: list[str]) -> None:
        """Journal the compaction (before the model is called on it), flush its facts,
        and put it in the report and the trace."""
        run = self.run
        journal = run.journal
        if journal is not None:
            journal.write(f"k.{state['n']}", "compaction", state)
            await journal.run.flush()
        workspace = run.settings.workspace
        if facts and workspace is not None and not run.settings.read_only:
            key, value = _flush(run.ctx, workspace, facts)
            report[key] = value
        report = {"turn": state["turn"], **report}
        if run.recorder is not None:
            run.recorder.compactions.append(report)
        run.reporter.trace("compaction", report)
