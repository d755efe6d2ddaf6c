"""What an agent run leaves behind: its session's messages and its report.

The agent policy already hears every step of a run through the hook events; the
:class:`Recorder` holds the run's session (one run of a session at a time, see
:meth:`Recorder.start`) and turns the events into

* the **messages** of the session, in the neutral format
  (:mod:`agent_apps.state.messages`), appended in one transaction as each turn ends
  (the user's message with the first turn, a hook's "continue" message with the next),
  so no provider needs to know about storage, and a crash loses at most the turn in
  flight;
* the **report**, written after every turn and when the run ends: the user message's
  attachments (without their bytes); per turn the model's text and reasoning (with a
  short summary), its timings, usage, cost and finish reason, and its tool calls
  (the code of each invoke call, the result the model read, latency, whether it was
  skipped) with the host calls their code made (skill, args, result or error, latency,
  whether a hook or the approver skipped or answered it, metrics); and the totals. An
  agent started by agent code names the host call that started it (``parent_call``);
* the **turn in flight**, written for watchers (the console) as it changes, at most
  every :data:`LIVE_INTERVAL` seconds, and cleared when the turn ends; with a journal
  it goes with the journal's next batch (within its ``UNACTED_DELAY``), not in a
  transaction of its own.

A turn's report, its messages and the journal's queued entries (the turn's host calls,
its marker) are one transaction, and so are the run's final report, status, trace and
what retention removes (docs/durability.md, "What a run writes together").

The user's message carries the run's attachments (``media``), and each assistant
message the reasoning its turn reported (``reasoning``), as seed 004 keeps thoughts
with the assistant's message.

Content is bounded (:mod:`agent_apps.agent.content`). Retention (``model.retention``)
decides what is kept once the run ends: ``permanent`` everything; ``run`` the messages
and memory while the run lasts, removed when it ends; ``none`` no message content at
all. Reports of runs that are not ``permanent`` keep no content either (no user
message, text, reasoning, attachment names, code, args, result or error message), while they run or
after: only ids, statuses, counts, sizes, timings, usage and cost.

A run **off the record** (``read_only``) reads its session and writes nothing to it:
no messages, no memory, and the session must exist already. It waits for the session
like any run, so what it reads is never a run's half-written turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ..attachments import describe
from ..errors import AgentAppsError, ApprovalPending, BudgetExceeded, Cancelled
from ..state.messages import History, Message, estimate_text, reasoning_summary
from .content import TEXT_LIMIT, ContentBudget, dumps, json_size

if TYPE_CHECKING:
    from ..budget import Price
    from ..run_record import RunRecord
    from ..state import StateStore
    from ..state.session_queue import SessionTurn
    from ..state.sessions import SessionInfo
    from .durable import AgentJournal, QueuedEntry

__all__ = ["LIVE_INTERVAL", "MAX_HOST_CALLS", "RETENTIONS", "STORE_TRACE", "Recorder"]

T = TypeVar("T")
RETENTIONS = ("none", "run", "permanent")
#: Seconds between two writes of the turn in flight (the first change after a quiet
#: spell is written at once): a watcher sees a change at most this much later, plus
#: its own polling interval.
LIVE_INTERVAL = 0.05
#: Host calls listed per tool call; past it they are counted (``host_calls_cut``).
MAX_HOST_CALLS = 200
#: The key of an agent's ``ctx.locals`` where middleware (the bundled ``session``) asks
#: that the run's trace be stored with its end, in the same transaction: a dict, in
#: which the run sets ``stored`` once it is.
STORE_TRACE = "agent_apps.store_trace"
_UNSET: Any = object()
#: The host call being made in this task: ``(agent id, call id)``. An agent that the
#: call starts reads it to name the call that started it.
_HOST_CALL: contextvars.ContextVar[tuple[str | None, str] | None] = contextvars.ContextVar(
    "agent_apps_host_call", default=None
)
_log = logging.getLogger("agent_apps.agent")


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
        read_only: bool = False,
        price: Price | None = None,
        reads_history: bool = False,
    ) -> None:
        """``reads_history``: the run's prompt window starts from the session's history in
        the store, read with the session at the start (:attr:`history_at_start`)."""
        self.store = store
        self.record = record
        #: a durable run's journal: turns replayed from it are stored already
        self.journal = journal
        self.session = record.session_id
        self.retention = retention
        self.read_only = read_only
        self.keeps_content = retention == "permanent"
        self.writes_messages = self.session is not None and retention != "none" and not read_only
        #: the model's price (USD per million tokens): each turn's cost, when known
        self.price = price
        self.content = ContentBudget()
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
            **({"tenant_id": record.tenant_id} if record.tenant_id else {}),
            "name": name,
            "provider": provider,
            "model": model,
            "session": self.session,
            "retention": retention,
            **({"read_only": True} if read_only else {}),
            "status": "running",
            "started_at": self.started,
        }
        caller = _HOST_CALL.get()
        if caller is not None and record.parent is not None and caller[0] == record.parent:
            self.report["parent_call"] = caller[1]
        if self.keeps_content:
            self.content.text(self.report, "user_message", user_message)
        if attachments:
            described = describe(attachments)
            self.report["attachments"] = (
                described if self.keeps_content else [{k: v for k, v in d.items() if k != "name"} for d in described]
            )
        self.steps: list[dict[str, Any]] = []
        self.compaction: dict[str, Any] | None = None
        #: the compactions during the run (compaction.RunCompaction), each with its turn
        self.compactions: list[dict[str, Any]] = []
        first: Message = {"role": "user", "text": user_message}
        if attachments:
            first["media"] = [dict(part) for part in attachments]
        #: user-side messages waiting for the next turn to end
        self._pending: list[Message] = [first]
        self._step: dict[str, Any] | None = None
        self._closed: dict[str, Any] | None = None  # the step whose turn ended, until it is stored
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._calls: list[dict[str, Any]] = []
        self._results: list[Message] = []
        self._open: dict[str, dict[str, Any]] = {}
        self._memory_seen: Any = _UNSET
        self._memory_at_start: dict[str, Any] | None = None
        #: The run's session as :meth:`start` found it, once the run holds it (None without one).
        self.session_at_start: SessionInfo | None = None
        #: Its history then, with ``reads_history``.
        self.history_at_start: History | None = None
        self._reads_history = reads_history
        #: its turn in the session, while it holds it
        self._turn: SessionTurn[tuple[SessionInfo, History | None]] | None = None
        self._holding: contextlib.AsyncExitStack | None = None  # the session, while this run holds it
        self.system_tokens = 0
        self._live_timer: asyncio.TimerHandle | None = None
        self._live_write: asyncio.Task[None] | None = None
        self._live_at = 0.0
        #: the trace to store with the run's end, and the request that asked for it
        self._trace: tuple[list[dict[str, Any]], dict[str, Any]] | None = None

    def store_trace(self, trace: list[dict[str, Any]], request: dict[str, Any]) -> None:
        """Store ``trace`` with the run's end (:data:`STORE_TRACE`), when the run keeps
        content (retention ``permanent``)."""
        if self.keeps_content:
            self._trace = (trace, request)

    # -- start -------------------------------------------------------------------------

    async def start(self) -> dict[str, Any] | None:
        """Record the run's start; returns the memory the session's last run left.

        A run in a session first waits until no other run of the session is in progress
        (:meth:`StateStore.session_lock <agent_apps.state.StateStore.session_lock>`), so
        the session's history never interleaves two runs; it holds the session until
        :meth:`finish`. The wait ends with the run's cancellation (status ``cancelled``)
        or its deadline (``budget``), as the run would. A run off the record waits the
        same way; it neither creates its session nor starts when it does not exist."""
        store, record, session = self.store, self.record, self.session
        opening = functools.partial(store.runs.start_agent, record, name=self.report["name"])
        if session is not None and self.read_only:
            await store.call(store.sessions.get, session)  # NotFound before anything is written
        # the run's row is written even when the wait for it is cancelled (Database.call,
        # or at once: Database.write_short), so it ends here, never left "running" by a
        # run that is gone
        try:
            if session is None:
                await store.db.write_short(opening)
                return None
            held = session

            def begin() -> tuple[SessionInfo, History | None]:
                info = store.sessions.get(held) if self.read_only else store.sessions.begin(held)
                return info, store.sessions.history(held) if self._reads_history else None

            self._turn = await self._hold_session(session, opening, begin)
            self.session_at_start, self.history_at_start = self._turn.value  # type: ignore[misc]
            memory = self._memory_at_start = self.session_at_start.memory
        except BaseException as exc:
            stopped = isinstance(exc, (Cancelled, asyncio.CancelledError))
            status = "budget" if isinstance(exc, BudgetExceeded) else "cancelled" if stopped else "error"
            await asyncio.shield(self.finish(status, error=error_of(exc, record.signal)))
            raise
        return memory  # retention decides what a run leaves, not what it may read

    async def _hold_session(
        self, session: str, opening: Callable[[], None], begin: Callable[[], tuple[SessionInfo, History | None]]
    ) -> SessionTurn[tuple[SessionInfo, History | None]]:
        """Wait for the session's turn (see :meth:`start`), the run's row written as it
        queues (``opening``); returns what ``begin`` read once the turn came. The
        session is held until :meth:`finish`."""
        record = self.record
        holding = contextlib.AsyncExitStack()
        lock = self.store.session_lock(session, record.run_id, opening=opening, granted=begin)
        waiting = holding.enter_async_context(lock)
        left = record.time_left
        try:
            if record.signal is not None:
                found = await record.signal.guard(asyncio.wait_for(waiting, left))
            else:
                found = await asyncio.wait_for(waiting, left)
        except TimeoutError:
            over = record.ledger.deadline_exceeded(time.time() + 0.001) if record.ledger is not None else None
            if over is None:
                raise
            raise over from None
        self._holding = holding
        return found

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
                "started_at": time.time(),
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
            args: dict[str, Any] = event["args"] if isinstance(event.get("args"), dict) else {}
            call: dict[str, Any] = {
                "id": ident,
                "tool": event.get("tool"),
                "started_at": time.time(),
                "skills": [],
                "host_calls": [],
                "skipped": False,
                "_start": now,
            }
            if self.keeps_content:
                self._keep_args(call, args)
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
            if self.keeps_content:
                self.content.text(found, "result", text)
            message: Message = {
                "role": "tool",
                "tool_call_id": str(found["id"]),
                "name": str(event.get("tool") or ""),
                "text": text,
                "error": error,
            }
            self._results.append(message)
        else:
            return
        self._changed()

    def _running_call(self) -> dict[str, Any] | None:
        """The tool call whose code runs now (of several run together, the last one)."""
        for call in reversed(self._step["tool_calls"] if self._step else ()):
            if "_start" in call:
                return call
        return None

    def _keep_args(self, call: dict[str, Any], args: dict[str, Any]) -> None:
        """A tool call's args, each cut on its own: the code of an invoke call is text."""
        kept: dict[str, Any] = {}
        for key, value in args.items():
            if isinstance(value, str):
                self.content.text(kept, key, value)
            else:
                self.content.value(kept, key, value)
        call["args"] = kept

    async def host_call(
        self, skill: str, args: dict[str, Any] | None, call: Callable[[dict[str, Any] | None], Awaitable[T]]
    ) -> T:
        """Agent code calls ``skill`` with ``args`` (a host call from the sandbox);
        ``call`` makes it, given the call's entry in the report to add what only the
        gateway knows (skipped, answered, replayed, metrics), or None when it is not
        listed. Recorded under the tool call whose code is running: args, result or
        error, latency."""
        owner = self._running_call()
        if owner is None:
            return await call(None)
        owner["skills"].append(skill)
        listed: list[dict[str, Any]] = owner["host_calls"]
        if len(listed) >= MAX_HOST_CALLS:
            owner["host_calls_cut"] = owner.get("host_calls_cut", 0) + 1
            return await call(None)
        entry: dict[str, Any] = {
            "id": f"{owner['id']}.{len(listed) + 1}",
            "skill": skill,
            "started_at": time.time(),
            "status": "running",
            "skipped": False,
        }
        if self.keeps_content and args is not None:
            self.content.value(entry, "args", args)
        listed.append(entry)
        self._changed()
        token = _HOST_CALL.set((self.record.agent_id, entry["id"]))
        start = time.perf_counter()
        try:
            result = await call(entry)
        except BaseException as exc:
            entry["latency_ms"] = round((time.perf_counter() - start) * 1000, 3)
            entry["status"] = "waiting-approval" if isinstance(exc, ApprovalPending) else "error"
            entry["error"] = {"type": type(exc).__name__}
            if self.keeps_content:
                self.content.text(entry["error"], "message", str(exc))
            raise
        else:
            entry["latency_ms"] = round((time.perf_counter() - start) * 1000, 3)
            entry["status"] = "ok"
            text = None if isinstance(result, str) else dumps(result)
            entry["result_size"] = json_size(result, text)
            if self.keeps_content:
                self.content.value(entry, "result", result, text=text)
            return result
        finally:
            _HOST_CALL.reset(token)
            self._changed()

    def skipped(self) -> None:
        """The tool call just announced did not run its code (denied, or refused)."""
        call = self._running_call()
        if call is not None:
            call["skipped"] = True

    def close_step(self, event: dict[str, Any]) -> dict[str, Any] | None:
        """The turn ended (``turn-end``): its step's report is complete. Returns it
        (seed 003's StepReport: latency, usage, finish reason, tool calls), which
        :meth:`end_turn` stores."""
        step = self._step
        if step is None:
            return None
        self._step, self._closed = None, step
        now = time.perf_counter()
        usage = event.get("usage") if isinstance(event.get("usage"), dict) else None
        start = step.pop("_start")
        first = step.pop("_first", now)
        latency = event.get("latency_ms")
        step["model_latency_ms"] = round(float(latency), 3) if latency is not None else round((first - start) * 1000, 3)
        step["usage"] = dict(usage or {})
        if self.price is not None:
            step["cost_usd"] = round(self.price.cost(step["usage"]), 8)
        reason = event.get("stop_reason")
        step["finish_reason"] = str(reason) if reason else ("tool_use" if self._calls else "end_turn")
        for call in step["tool_calls"]:
            call.pop("_start", None)
        step["tool_ms"] = round(sum(c.get("latency_ms") or 0 for c in step["tool_calls"]), 3)
        step["total_ms"] = round((now - start) * 1000, 3)
        if self.journal is not None and self.journal.turn_stored(step.get("turn")):  # a resumed run's, from the journal
            step["replayed"] = True
        return {k: v for k, v in step.items() if not k.startswith("_")}

    async def end_turn(self, event: dict[str, Any], directive: Any, memory: Any) -> None:
        """The turn ended: store its messages (and the sandbox ``memory``), and the report."""
        if self._step is not None:
            self.close_step(event)
        step = self._closed
        if step is None:
            return
        self._closed = None
        usage = event.get("usage") if isinstance(event.get("usage"), dict) else None
        turn = step.get("turn")
        replayed = bool(step.get("replayed"))

        text = event.get("result")
        assistant: Message = {"role": "assistant", "text": str(text if text is not None else "".join(self._text))}
        reasoning = "".join(self._reasoning)
        if reasoning:
            assistant["reasoning"] = reasoning
        if self.keeps_content:
            self.content.text(step, "text", assistant["text"])
            if reasoning:
                self.content.text(step, "reasoning", reasoning)
                step["reasoning_summary"] = reasoning_summary(reasoning)
        elif reasoning:
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

        await self._live_written()

        def write() -> None:
            # one transaction with the journal's queued entries (the turn's host calls):
            # the report, the messages and the turn's marker are all stored or none is
            store.runs.report(record, report)
            if session is not None:
                store.sessions.append(
                    session,
                    batch,
                    run_id=record.run_id,
                    memory=saved if saved is not _UNSET else None,
                    anchor=anchor,
                )

        # the turn's marker (its messages, for export and replay) goes in the INSERT of
        # the turn's queued entries
        marker = {"turn": turn, "messages": batch}
        await self._commit(write, () if journal is None or replayed else (journal.entry(f"t.{turn}", "turn", marker),))

    # -- the turn in flight ------------------------------------------------------------

    def _changed(self) -> None:
        """The turn in flight changed: write it for watchers, now or when
        :data:`LIVE_INTERVAL` has passed since the last write."""
        if self._live_timer is not None or self._step is None:
            return
        loop = asyncio.get_running_loop()
        delay = max(0.0, self._live_at + LIVE_INTERVAL - time.monotonic())
        self._live_timer = loop.call_later(delay, self._write_live)

    def _write_live(self) -> None:
        self._live_timer = None
        step = self._step
        if step is None:
            return
        self._live_at = time.monotonic()
        live = {k: v for k, v in step.items() if not k.startswith("_")}
        live["tool_calls"] = [{k: v for k, v in c.items() if k != "_start"} for c in step["tool_calls"]]
        if self.keeps_content:  # the text so far, cut as the turn's own will be
            for field, parts in (("text", self._text), ("reasoning", self._reasoning)):
                if parts:
                    ContentBudget(self.content.room).text(live, field, "".join(parts))
        text = dumps(live)
        journal = self.journal
        if journal is not None:  # with the journal's next batch (within its UNACTED_DELAY), one commit
            journal.run.write_with(f"live {journal.path}", functools.partial(self.store.runs.live, self.record, text))
            return
        before = self._live_write
        self._live_write = asyncio.ensure_future(self._store_live(text, before))

    async def _store_live(self, text: str, before: asyncio.Task[None] | None) -> None:
        if before is not None:
            await asyncio.wait([before])  # in the order they were taken
        try:
            await self.store.call(self.store.runs.live, self.record, text)
        except Exception:  # a watcher's view; the turn's report is what counts
            _log.debug("writing the turn in flight failed", exc_info=True)

    async def _live_written(self) -> None:
        """No write of the turn in flight is pending or in progress: what comes next
        (the turn's report, the final one) is written after it."""
        if self._live_timer is not None:
            self._live_timer.cancel()
            self._live_timer = None
        if self.journal is not None:  # the turn's report, written next, ends the turn in flight
            self.journal.run.discard(f"live {self.journal.path}")
        if self._live_write is not None:
            await asyncio.wait([self._live_write])
            self._live_write = None

    # -- the end -----------------------------------------------------------------------

    async def finish(
        self, status: str, *, result: Any = None, error: dict[str, Any] | None = None, message: str | None = None
    ) -> None:
        """The run ended with ``status``: its final report (with ``error``, its type and
        message, when it failed; stopped before its end, its terminal ``message``), and
        what retention removes."""
        self.report["status"] = status
        if message is not None:
            self.report["message"] = message
        if error is not None:
            self.report["error"] = {key: value for key, value in error.items() if key != "message"}
            if "message" in error:
                self.content.text(self.report["error"], "message", str(error["message"]))
        elif self.keeps_content:
            self.content.value(self.report, "result", result, TEXT_LIMIT)
        report = self._report(final=True)
        store, record, session, journal = self.store, self.record, self.session, self.journal
        await self._live_written()
        # a run waiting for approval has not ended: it keeps what a resume needs
        ended = self.retention == "run" and status != "waiting-approval"
        forget = ended and session is not None and not self.read_only

        trace = None if self._trace is None else list(self._trace[0])
        turn, self._turn = self._turn, None

        def write() -> None:
            store.runs.finish_agent(record, status=status, report=report, trace=trace)
            if forget:
                store.sessions.forget_run(session, record.run_id, memory=self._memory_at_start)  # type: ignore[arg-type]
            if ended and journal is not None:  # an outermost agent takes the run's checkpoint with it
                store.journal.forget(record.run_id, journal.path if record.parent is not None else None)
            if turn is not None:  # the session's next run may go on once this commits
                turn.give_back()

        try:
            await self._commit(write)
            if turn is not None:
                turn.given_back()
            if self._trace is not None:
                self._trace[1]["stored"] = True
        finally:  # the session's next run may go on (given back here if the write failed)
            holding, self._holding = self._holding, None
            if holding is not None:
                await holding.aclose()

    async def _commit(self, write: Callable[[], None], entries: Sequence[QueuedEntry] = ()) -> None:
        """Run ``write`` (store writes, short: :meth:`Database.write_short
        <agent_apps.state._db.Database.write_short>`) in one transaction, with every
        journal entry still queued and ``entries`` (written before it, so a turn's marker
        or the run's end never stands without the host calls before it)."""
        if self.journal is not None:
            await self.journal.run.flush(write, entries)
        else:
            await self.store.db.write_short(write)

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
        if self.price is not None:
            report["cost_usd"] = round(sum(s.get("cost_usd") or 0 for s in steps), 8)
        if self.compaction is not None:
            report["compaction"] = self.compaction
        if self.compactions:
            report["compactions"] = self.compactions
        if self.record.ledger is not None:  # limits, and usage with the agents below this one
            report["budget"] = self.record.ledger.to_json()
        if final:
            report["ended_at"] = time.time()
            report["total_ms"] = round((time.perf_counter() - self._clock) * 1000, 3)
        return report

    def set_system(self, system_prompt: str) -> None:
        self.system_tokens = estimate_text(system_prompt)


def error_of(exc: BaseException, signal: Any) -> dict[str, Any]:
    """What a run's events and its report say of the error it ended with: a task
    cancelled under it reads as the cancellation it is, with ``signal``'s reason."""
    if isinstance(exc, AgentAppsError):
        return exc.to_json()
    if isinstance(exc, asyncio.CancelledError):
        reason = signal.reason if signal is not None else None
        return {"type": "Cancelled", "message": reason or "cancelled"}
    return {"type": type(exc).__name__, "message": str(exc)}
