"""What an agent run leaves behind: its session's messages and its report.

The agent policy already hears every step of a run through the hook events; the
:class:`Recorder` turns them into

* the **messages** of the session, in the neutral format
  (:mod:`agent_apps.state.messages`), appended in one transaction as each turn ends
  (the user's message with the first turn, a hook's "continue" message with the next),
  so no provider needs to know about storage, and a crash loses at most the turn in
  flight;
* the **report** (steps with model latency, usage and finish reason, and the model's
  reasoning with a short summary; tool calls with the skills their code called, args,
  result size, latency and error; the attachments; totals), written after every turn
  and when the run ends.

The user's message carries the run's attachments (``media``), and each assistant
message the reasoning its turn reported (``reasoning``), as seed 004 keeps thoughts
with the assistant's message.

Retention (``model.retention``) decides what is kept once the run ends: ``permanent``
everything; ``run`` the messages and memory while the run lasts, removed when it ends;
``none`` no message content at all. Reports of runs that are not ``permanent`` keep no
content either (no user message, result, code, tool output, reasoning or attachment
names): only ids, statuses, counts, sizes, timings and usage.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..attachments import describe
from ..state.messages import Message, estimate_text, reasoning_summary

if TYPE_CHECKING:
    from ..run_record import RunRecord
    from ..state import StateStore
    from .durable import AgentJournal

__all__ = ["RETENTIONS", "Recorder"]

RETENTIONS = ("none", "run", "permanent")
_UNSET: Any = object()


class Recorder:
    """One agent run's messages and report (see the module docstring)."""

    def __init__(
        self,
        store: StateStore,
        record: RunRecord,
        *,
        name: str,
        provider: str,
        model: str | None,
        retention: str,
        user_message: str,
        attachments: Sequence[dict[str, Any]] = (),
        journal: AgentJournal | None = None,
    ) -> None:
        self.store = store
        self.record = record
        #: a durable run's journal: turns replayed from it are stored already
        self.journal = journal
        self.session = record.session_id
        self.retention = retention
        self.keeps_content = retention == "permanent"
        self.writes_messages = self.session is not None and retention != "none"
        self.started = time.time()
        self._clock = time.perf_counter()
        self.report: dict[str, Any] = {
            "run_id": record.run_id,
            "agent_id": record.agent_id,
            "parent": record.parent,
            "depth": record.depth,
            "trace_id": record.trace_id,
            "priority": record.priority,
            "deadline": record.deadline,
            "name": name,
            "provider": provider,
            "model": model,
            "session": self.session,
            "retention": retention,
            "status": "running",
            "started_at": self.started,
        }
        if self.keeps_content:
            self.report["user_message"] = user_message
        if attachments:
            described = describe(attachments)
            self.report["attachments"] = (
                described if self.keeps_content else [{k: v for k, v in d.items() if k != "name"} for d in described]
            )
        self.steps: list[dict[str, Any]] = []
        self.compaction: dict[str, Any] | None = None
        first: Message = {"role": "user", "text": user_message}
        if attachments:
            first["media"] = [dict(part) for part in attachments]
        #: user-side messages waiting for the next turn to end
        self._pending: list[Message] = [first]
        self._step: dict[str, Any] | None = None
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._calls: list[dict[str, Any]] = []
        self._results: list[Message] = []
        self._open: dict[str, dict[str, Any]] = {}
        self._memory_seen: Any = _UNSET
        self._memory_at_start: dict[str, Any] | None = None
        self.system_tokens = 0

    # -- start -------------------------------------------------------------------------

    async def start(self) -> dict[str, Any] | None:
        """Record the run's start; returns the memory the session's last run left."""
        store, record = self.store, self.record

        def begin() -> dict[str, Any] | None:
            store.runs.start_agent(record, name=self.report["name"])
            return store.sessions.begin(self.session) if self.session is not None else None

        memory = self._memory_at_start = await store.call(begin)
        return memory  # retention decides what a run leaves, not what it may read

    # -- hook events -------------------------------------------------------------------

    def observe(self, event: dict[str, Any]) -> None:
        """Take in one hook event (every event of the run passes here, in order)."""
        kind = event.get("type")
        now = time.perf_counter()
        if kind == "turn-start":
            self._step = {
                "index": len(self.steps),
                "turn": event.get("turn"),
                "type": "initial" if not self.steps else "followup",
                "_start": now,
                "tool_calls": [],
            }
            self.steps.append(self._step)
            self._text, self._reasoning, self._calls, self._results, self._open = [], [], [], [], {}
        elif self._step is None:
            return
        elif kind in ("message", "reasoning") and event.get("text"):
            (self._text if kind == "message" else self._reasoning).append(str(event["text"]))
            self._step.setdefault("_first", now)
        elif kind == "tool-call":
            self._step.setdefault("_first", now)
            ident = str(event.get("id") or f"{self.record.agent_id}-{self._step['turn']}-{len(self._calls)}")
            args = event.get("args") if isinstance(event.get("args"), dict) else {}
            call: dict[str, Any] = {"id": ident, "tool": event.get("tool"), "skills": [], "_start": now}
            if self.keeps_content:
                call["args"] = args
            self._step["tool_calls"].append(call)
            self._open[ident] = call
            self._calls.append({"id": ident, "name": str(event.get("tool") or ""), "input": args})
        elif kind == "tool-result":
            ident = str(event.get("id") or "")
            found = self._open.pop(ident, None) or next(iter(self._open.values()), None)
            if found is None:
                return
            self._open.pop(found["id"], None)
            result = event.get("result")
            text = str(result.get("text", "")) if isinstance(result, dict) else str(result or "")
            error = bool(result.get("error")) if isinstance(result, dict) else False
            found["latency_ms"] = round((now - found.pop("_start")) * 1000, 3)
            found["result_size"] = len(text.encode("utf-8"))
            found["error"] = (text if self.keeps_content else True) if error else None
            message: Message = {
                "role": "tool",
                "tool_call_id": str(found["id"]),
                "name": str(event.get("tool") or ""),
                "text": text,
                "error": error,
            }
            self._results.append(message)

    def called(self, skill: str) -> None:
        """Agent code called ``skill`` (a host call from the sandbox)."""
        for call in reversed(self._step["tool_calls"] if self._step else ()):
            if "_start" in call:
                call["skills"].append(skill)
                return

    async def end_turn(self, event: dict[str, Any], directive: Any, memory: Any) -> None:
        """The turn ended: store its messages (and the sandbox ``memory``), and the report."""
        step = self._step
        if step is None:
            return
        self._step = None
        now = time.perf_counter()
        usage = event.get("usage") if isinstance(event.get("usage"), dict) else None
        start = step.pop("_start")
        first = step.pop("_first", now)
        latency = event.get("latency_ms")
        step["model_latency_ms"] = round(float(latency), 3) if latency is not None else round((first - start) * 1000, 3)
        step["usage"] = dict(usage or {})
        reason = event.get("stop_reason")
        step["finish_reason"] = str(reason) if reason else ("tool_use" if self._calls else "end_turn")
        for call in step["tool_calls"]:
            call.pop("_start", None)
        step["tool_ms"] = round(sum(c.get("latency_ms") or 0 for c in step["tool_calls"]), 3)
        turn = step.get("turn")
        replayed = self.journal is not None and self.journal.turn_stored(turn)
        if replayed:  # a resumed run: this turn came from the journal
            step["replayed"] = True

        text = event.get("result")
        assistant: Message = {"role": "assistant", "text": str(text if text is not None else "".join(self._text))}
        reasoning = "".join(self._reasoning)
        if reasoning:
            assistant["reasoning"] = reasoning
            if self.keeps_content:
                step.update(reasoning=reasoning, reasoning_summary=reasoning_summary(reasoning))
            else:
                step["reasoning_chars"] = len(reasoning)
        if self._calls:
            assistant["tool_calls"] = self._calls  # type: ignore[typeddict-item]
        batch = [*self._pending, assistant, *self._results]
        anchor_at = len(self._pending)
        self._pending = []
        if isinstance(directive, dict) and directive.get("continue") and directive.get("message"):
            self._pending.append({"role": "user", "text": str(directive["message"])})

        store, record, journal = self.store, self.record, self.journal
        report = self._report()
        session = self.session if self.writes_messages and not replayed else None
        anchor = None
        if usage and usage.get("input_tokens"):
            total = sum(int(usage.get(k) or 0) for k in ("input_tokens", "cache_read_tokens", "cache_write_tokens"))
            anchor = (max(0, total - self.system_tokens), anchor_at)
        saved = _UNSET
        if session is not None and memory is not self._memory_seen:
            saved = self._memory_seen = memory

        if journal is not None:  # the turn's host calls first: its marker says it is complete
            await journal.run.flush()

        def write() -> None:
            if session is not None:
                store.sessions.append(
                    session,
                    batch,
                    run_id=record.run_id,
                    memory=saved if saved is not _UNSET else None,
                    anchor=anchor,
                )
            store.runs.report(record, report)
            if journal is not None and not replayed:  # the turn's messages, for export and replay
                journal.add_now(f"t.{turn}", "turn", {"turn": turn, "messages": batch})

        await store.call(write)

    # -- the end -----------------------------------------------------------------------

    async def finish(self, status: str, *, result: Any = None, error: dict[str, Any] | None = None) -> None:
        """The run ended with ``status``: its final report (with ``error``, its type and
        message, when it failed), and what retention removes."""
        self.report["status"] = status
        if error is not None:
            self.report["error"] = error
        elif self.keeps_content:
            self.report["result"] = result
        report = self._report(final=True)
        store, record, session, journal = self.store, self.record, self.session, self.journal
        if journal is not None:
            await journal.run.flush()
        # a run waiting for approval has not ended: it keeps what a resume needs
        ended = self.retention == "run" and status != "waiting-approval"
        forget = ended and session is not None

        def write() -> None:
            store.runs.finish_agent(record, status=status, report=report)
            if forget:
                store.sessions.forget_run(session, record.run_id, memory=self._memory_at_start)  # type: ignore[arg-type]
            if ended and journal is not None:  # an outermost agent takes the run's checkpoint with it
                store.journal.forget(record.run_id, journal.path if record.parent is not None else None)

        await store.call(write)

    def _report(self, *, final: bool = False) -> dict[str, Any]:
        steps = [
            {k: v for k, v in step.items() if not k.startswith("_")} for step in self.steps if step is not self._step
        ]
        calls = [call for step in steps for call in step["tool_calls"]]
        usage: dict[str, int] = {}
        for step in steps:
            for key, value in (step.get("usage") or {}).items():
                if isinstance(value, bool):  # "estimated": the provider could only guess the counts
                    usage[key] = usage.get(key) or value
                elif isinstance(value, int):
                    usage[key] = usage.get(key, 0) + value
        report = {
            **self.report,
            "steps": steps,
            "step_count": len(steps),
            "tool_call_count": len(calls),
            "usage": usage,
            "model_ms": round(sum(s.get("model_latency_ms") or 0 for s in steps), 3),
            "tool_ms": round(sum(s.get("tool_ms") or 0 for s in steps), 3),
        }
        if self.compaction is not None:
            report["compaction"] = self.compaction
        if self.record.ledger is not None:  # limits, and usage with the agents below this one
            report["budget"] = self.record.ledger.to_json()
        if final:
            report["ended_at"] = time.time()
            report["total_ms"] = round((time.perf_counter() - self._clock) * 1000, 3)
        return report

    def set_system(self, system_prompt: str) -> None:
        self.system_tokens = estimate_text(system_prompt)
