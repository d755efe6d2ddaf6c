"""Durable agent runs: the journal an agent run writes and a resumed run replays.

Every agent run whose provider reports its model calls keeps a **journal** in the state
store (``store.journal``, docs/durability.md), written as things happen:

==========  =============  ===========================================================
key         kind           body
==========  =============  ===========================================================
start       start          served skill, user message, system prompt layers, tool
                           names, the sandbox memory it started with, the session's
                           prompt window
m.TURN      model          the model's response of that turn, as the provider acted
                           on it
c.STEP      code           the clock base and random seed of the STEP-th code run (a
                           batch of parallel tool calls is one code run, numbered by
                           its last call)
h.STEP.N    call           the Nth host call of that code run: skill, args, result or
                           error (or skipped)
t.TURN      turn           the turn's messages, stored (in the session, if any)
==========  =============  ===========================================================

Entries are keyed by the agent's **path** in the run tree, not by its agent id (random
per process): the outermost agents are ``a1``, ``a2``, ... in the order they start, an
agent started below host call ``h.S.N`` of agent ``P`` is ``P/S.N/a1``, ``P/S.N/a2``...

A **resumed** run (``cm.resume``) invokes the run's root again with the journal loaded:
model turns found in it are answered from it (the ``response`` directive, so the
provider does not ask the model), code runs get their recorded clock and seed, and host
calls are answered from it, matched by skill and args within their code run (so calls
that ran concurrently may come back in another order). A call the journal does not
hold runs for real, unless the journal expected another call at that position: then the
run stops with :class:`~agent_apps.errors.ReplayDiverged` and nothing is executed.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._json import encoder
from .._random import randbits
from ..authority import DELEGATION, Authority, Delegation, invoke_as
from ..errors import ReplayDiverged

if TYPE_CHECKING:
    from ..context import Context
    from ..manager import ContextManager
    from ..state import StateStore
    from ..state.journal import Checkpoint, JournalEntry

__all__ = [
    "NO_RESULT",
    "SCOPE",
    "AgentJournal",
    "HostCall",
    "ReplayedError",
    "RunJournal",
    "decide",
    "failure",
    "invocation_of",
    "replay",
    "resume",
]

#: The internal a host call from agent code carries, ``(its agent's journal, the
#: HostCall)``, so agents started below it find their path.
SCOPE = "agent_journal"
_ROOT_KEY = "journal"
#: Queued journal entries are written at most this long after they happened (in one
#: transaction per batch), and at once before a model call, before the first host call
#: acting on a model response and before a checkpoint; a turn's end and the run's end
#: write them in their own transaction (docs/durability.md, "What a run writes together").
WRITE_DELAY = 0.005
#: ... but entries nothing outside the sandbox has acted on yet (the start, a model
#: response, a code run's clock and seed) and the turn in flight (:meth:`RunJournal.write_with`)
#: wait this long: the flushes above write them before anything acts on them, and a crash
#: before that costs at most the model call made again. A host call's outcome (an effect
#: that happened) pulls its batch to :data:`WRITE_DELAY`. Under load (2,000 runs at once)
#: the shorter delay split most turns' writes in two: the response's batch fell due
#: before the code's first call or the turn's end came to flush it.
UNACTED_DELAY = 0.05


@dataclass
class HostCall:
    """One host call from agent code: code run ``step``, ``index``-th issued in it."""

    step: int
    index: int
    skill: str
    args: dict[str, Any] | None
    next: bool = False
    #: agents started below this call so far
    agents: int = 0

    @property
    def key(self) -> str:
        return f"h.{self.step}.{self.index}"

    def describe(self) -> str:
        return f"{self.skill} {_short(self.args)}"


#: A journal entry queued for a batch: the agent's path, its key, kind, body (not yet
#: JSON) and when it was made.
QueuedEntry = tuple[str, str, str, Any, float]


class ReplayedError(Exception):
    """A host call's error, answered from the journal: the agent code sees an
    exception of the original type name with the original message."""

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(message)
        self.type_name = type_name


@dataclass
class _Expected:
    index: int
    content: str
    entry: JournalEntry
    used: bool = False


@dataclass
class RunJournal:
    """One run's journal in this process, shared by the agents of the run (it lives on
    the root invocation's internals)."""

    store: StateStore
    run_id: str
    #: The checkpoint a resumed run was taken up from (None: a new run).
    checkpoint: Checkpoint | None = None
    entries: list[JournalEntry] = field(default_factory=list)
    #: How to invoke the run's root again (recorded by the run's first agent).
    invocation: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        self._roots = itertools.count(1)
        self._by_agent: dict[str, dict[str, JournalEntry]] = {}
        for entry in self.entries:
            self._by_agent.setdefault(entry.agent, {})[entry.key] = entry
        #: taken up again by cm.resume (its invocation is recorded already)
        self.resumed = self.recorded = self.checkpoint is not None
        self._rows: list[QueuedEntry] = []
        #: Entries (and the invocation) queued so far, and how many of the first of them
        #: are committed: a flush waits for those queued before it, not for newer ones.
        self._sequenced = self._saved = 0
        #: The sequence number of the last model response queued (:attr:`response_unsaved`).
        self._response = 0
        #: The invocation to record with the next batch (the run's first agent started).
        self._invocation: dict[str, Any] | None = None
        #: Other writes for the next batch, by key (:meth:`write_with`).
        self._also: dict[str, Callable[[], None]] = {}
        self._writer: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._due = 0.0  # when the queued batch is due (the event loop's clock)
        self._failed: BaseException | None = None

    @property
    def pending(self) -> dict[str, Any] | None:
        """The call the run waited for, while its decision is not applied yet."""
        point = self.checkpoint
        return point.pending if point is not None and point.decision is not None else None

    @classmethod
    def of(cls, ctx: Context) -> RunJournal:
        """The journal of ``ctx``'s run, made on first use by the run's first agent."""
        root = ctx
        while root.parent is not None:
            root = root.parent
        journal = root.internals.get(_ROOT_KEY)
        if journal is None:
            cm = ctx.manager.context_manager
            journal = root.internals[_ROOT_KEY] = cls(cm.state, ctx.run.run_id, invocation=invocation_of(root))
        return journal  # type: ignore[no-any-return]

    @property
    def response_unsaved(self) -> bool:
        """A model response was queued and is not committed yet: it is written before
        the first host call acting on it (``HostCalls._journaled``)."""
        return self._saved < self._response

    def response_queued(self) -> None:
        """The entry queued last is a model response (see :attr:`response_unsaved`)."""
        self._response = self._sequenced

    @property
    def resumable(self) -> bool:
        """The run can be taken up again: a resumed one, or one whose root can be invoked again."""
        return self.resumed or bool(self.invocation and self.invocation.get("skill"))

    def agent(self, ctx: Context, *, name: str) -> AgentJournal:
        """The journal of the agent run at ``ctx``: its path is that of the nearest host
        call above it, or the next outermost one."""
        node: Context | None = ctx
        while node is not None:
            scope = node.internals.get(SCOPE)
            if scope is not None:
                journal, call = scope
                call.agents += 1
                path = f"{journal.path}/{call.step}.{call.index}/a{call.agents}"
                break
            node = node.parent
        else:
            path = f"a{next(self._roots)}"
        return AgentJournal(self, path, self._by_agent.get(path, {}), name=name)

    # -- writing: behind the run, in order, in batches -----------------------------------

    def write(self, agent: str, key: str, kind: str, body: Any) -> None:
        """Queue one entry. Entries are written in the order they were queued, in
        batches, on the store's thread, at most :data:`WRITE_DELAY` seconds after they
        were queued for a host call's outcome, :data:`UNACTED_DELAY` for the others
        (plus the rest of a write in flight then); :meth:`flush` writes them now and
        waits until they are."""
        self._arm(WRITE_DELAY if kind == "call" else UNACTED_DELAY)
        self._rows.append((agent, key, kind, body, time.time()))
        self._sequenced += 1

    def _arm(self, delay: float) -> None:
        """Before queueing: the batch queued falls due ``delay`` from now, unless it
        does sooner. Writes queued while a batch is written wait for their own, due
        then too, so calls that never stop make one write per WRITE_DELAY, not one per
        store round trip: the store's thread, kept busy, would take the GIL from the
        event loop at each of the sandbox's calls into wasmtime (which let it go)."""
        loop = asyncio.get_running_loop()
        due = loop.time() + delay
        if self._queued and due >= self._due:
            return
        self._due = due
        if self._writer is None:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = loop.call_at(due, self._start)

    def discard(self, key: str) -> None:
        """Drop the write queued under ``key`` (:meth:`write_with`), if it is not written yet."""
        self._also.pop(key, None)

    def write_with(self, key: str, fn: Callable[[], None]) -> None:
        """Queue a store write (``fn``, run on the store's thread) to go with the next
        batch, after its entries: the one queued last under ``key`` replaces any before
        it (the turn in flight, of which only the latest state counts)."""
        self._arm(UNACTED_DELAY)
        self._also.pop(key, None)
        self._also[key] = fn

    def begin(self, agent: str, body: dict[str, Any]) -> None:
        """Queue the first agent's ``start`` entry, with the run's invocation when it is
        not recorded yet (the checkpoint a resume starts from): both go in the first batch."""
        if not self.recorded:
            self.recorded = True
            self._invocation = self.invocation
            self._sequenced += 1
        self.write(agent, "start", "start", body)

    async def flush(
        self, then: Callable[[], None] | None = None, entries: Sequence[QueuedEntry] = ()
    ) -> None:
        """Write every entry queued before this call, and wait until they are; raise
        what writing raised. Entries a batch in flight holds are not written twice:
        calls that flush at once (the parallel host calls acting on one model response)
        wait for one batch, and none writes the entries the others queued meanwhile.
        ``then`` (store writes, run on the store's thread) goes in the same transaction
        as the entries, and always makes one: one commit for a turn's entries and its
        messages. ``entries`` (made by :meth:`AgentJournal.entry`: a turn's marker) go
        in it too, in the queued entries' INSERT. When that transaction fails, its
        queued entries stay queued for the next write; ``then`` and ``entries`` do not.
        Other queued writes (:meth:`write_with`) go along, but alone they wait for their
        timer: nothing durable rests on them."""
        target = self._sequenced
        while True:
            while self._writer is not None:  # the batch being written goes first
                await asyncio.wait([self._writer])
            if self._failed is not None:
                raise self._failed
            if then is not None or entries:
                await asyncio.shield(self._write_batch(then, entries))
            elif self._saved < target:  # a batch that failed put them back: written again here
                await asyncio.shield(self._write_batch(None))
                continue
            return

    @property
    def _queued(self) -> bool:
        return bool(self._rows or self._also or self._invocation is not None)

    def _start(self) -> None:
        self._timer = None
        if self._writer is None and self._failed is None and self._queued:
            self._write_batch(None)

    def _write_batch(
        self, then: Callable[[], None] | None, entries: Sequence[QueuedEntry] = ()
    ) -> asyncio.Future[None]:
        """Write what is queued (and ``then`` and ``entries``) in one transaction, as
        the only writer."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        rows, self._rows = self._rows, []
        invocation, self._invocation = self._invocation, None
        upto = self._sequenced  # everything queued so far is in this batch
        also, self._also = self._also, {}
        store = self.store
        writes = [*also.values(), *([then] if then is not None else [])]
        # a flush's write (a turn's end, the run's end) is short; the checkpoint and the
        # batches due on their timer go to the store's thread
        short = then is not None and invocation is None
        write = store.db.write_short if short else functools.partial(store.call, store.db.together)
        writing = self._writer = asyncio.ensure_future(
            write(_write_batch, store, self.run_id, invocation, [*rows, *entries], writes)
        )

        def written(future: asyncio.Future[None]) -> None:
            self._writer = None
            failed = None if future.cancelled() else future.exception()
            if failed is None and not future.cancelled():
                self._saved = upto
            if failed is not None:  # rolled back: what it held is written with the next batch
                self._rows[:0] = rows
                self._invocation = self._invocation or invocation
                self._also = {**also, **self._also}
                if then is None:  # the journal's own write: every later flush() raises it
                    self._failed = failed
            if self._queued and self._timer is None and self._failed is None:
                self._timer = asyncio.get_running_loop().call_at(self._due, self._start)

        writing.add_done_callback(written)
        return writing

    async def settle(self) -> None:
        """The recorded decision was applied: clear it (here and in the store)."""
        self.checkpoint = None
        await self.store.call(self.store.journal.settle, self.run_id)


class AgentJournal:
    """One agent run's journal: its model-call interceptor (the first, outermost one),
    and what the policy asks at each code run and host call."""

    #: a journal needs no copy of the conversation and never changes a response
    needs_messages = False
    changes_responses = False

    def __init__(self, run: RunJournal, path: str, entries: dict[str, JournalEntry], *, name: str) -> None:
        self.run = run
        self.path = path
        self.name = name
        self.entries = entries
        #: replaying: this agent's journal has entries (a resumed run)
        self.replaying = bool(entries)
        self._expected: dict[int, list[_Expected]] = {}
        self._step = 0
        self._issued = 0
        self._answered = False  # the model call in flight was answered from the journal

    # -- writing -------------------------------------------------------------------------

    def write(self, key: str, kind: str, body: Any) -> None:
        """Queue an entry of this agent (see :meth:`RunJournal.write`)."""
        self.run.write(self.path, key, kind, body)

    def entry(self, key: str, kind: str, body: Any) -> QueuedEntry:
        """An entry of this agent for :meth:`RunJournal.flush` to write with its batch."""
        return (self.path, key, kind, body, time.time())

    # -- the start -----------------------------------------------------------------------

    @property
    def started(self) -> dict[str, Any] | None:
        """What the agent started with the first time (a resumed run), else None."""
        entry = self.entries.get("start")
        return entry.body if entry is not None else None

    def start(self, body: dict[str, Any]) -> None:
        """Record how this agent started, or check a resumed one starts the same way."""
        started = self.started
        if started is not None:
            for key, what in (("skill", "serves"), ("user_message", "was asked")):
                if started.get(key) != body.get(key):
                    raise ReplayDiverged(
                        self.run.run_id,
                        f"agent {self.name} ({self.path}) {what} {_short(body.get(key))} where the journal has "
                        f"{_short(started.get(key))}; nothing was executed",
                    )
            return
        self.run.begin(self.path, body)  # written before the model is first asked (model_call)

    # -- model calls (a ModelInterceptor) -------------------------------------------------

    async def model_call(self, event: dict[str, Any]) -> dict[str, Any] | None:
        # What the model will be told rests on what is queued (the start, a code run's
        # host calls, whose outcome it reads now): all of it is written first.
        await self.run.flush()
        entry = self.entries.get(f"m.{event.get('turn')}")
        self._answered = entry is not None
        return {"response": entry.body["response"]} if entry is not None else None

    async def model_response(self, event: dict[str, Any]) -> dict[str, Any] | None:
        # The model's answer, or one a middleware inside gave itself (replayed: true
        # too), not one this journal gave: written before the provider acts on it, that
        # is before the first host call of its code (the gateway flushes then), with
        # the turn's end, or within UNACTED_DELAY, whichever comes first.
        if not self._answered:
            turn = event.get("turn")
            self.write(f"m.{turn}", "model", {"turn": turn, "response": event.get("response")})
            self.run.response_queued()
        return None

    def turn_stored(self, turn: Any) -> bool:
        """Turn ``turn``'s messages were stored already (it is being replayed)."""
        return f"t.{turn}" in self.entries

    # -- code runs and host calls --------------------------------------------------------

    def code_run(self, step: int) -> dict[str, Any]:
        """A code run starts: its clock base and seed (recorded, or replayed)."""
        self._step, self._issued = step, 0
        entry = self.entries.get(f"c.{step}")
        if entry is not None:
            return entry.body
        clock = {"time": time.time(), "seed": randbits(63)}
        self.write(f"c.{step}", "code", clock)
        return clock

    def issue(self, skill: str, args: dict[str, Any] | None, *, next: bool = False) -> HostCall:
        """Number a host call of the current code run, in the order it was issued."""
        self._issued += 1
        return HostCall(self._step, self._issued, skill, args, next)

    def replayed(self, call: HostCall) -> JournalEntry | None:
        """The journal's answer to ``call``, or None when it must really be made.
        Raises :class:`ReplayDiverged` when the journal expected another call here."""
        if not self.replaying:
            return None
        expected = self._expected_calls(call.step)
        content = _content(call.skill, call.args)
        for item in expected:
            if not item.used and item.content == content:
                item.used = True
                return item.entry
        pending = self._pending(call.step)
        if pending is not None and _content(pending["skill"], pending.get("args")) == content:
            return None  # the call that waited for approval: the gate applies the decision
        waiting = [(i.index, _describe(i.entry.body)) for i in expected if not i.used and i.index <= call.index]
        if pending is not None and int(pending.get("index", 0)) <= call.index:
            waiting.append((int(pending["index"]), f"{pending['skill']} {_short(pending.get('args'))} (approved)"))
        if waiting:
            index, what = min(waiting)
            raise ReplayDiverged(
                self.run.run_id,
                f"agent {self.name} ({self.path}), code run {call.step}: the code now calls {call.describe()} "
                f"where the journal holds {what} (call {index} of that run); nothing was executed. The code, "
                "a skill it calls or something it reads outside the journal changed since the run began",
            )
        return None

    def record(self, call: HostCall, outcome: dict[str, Any]) -> None:
        """Journal what a host call did: ``{"ok": true, "result": ...}``, ``{"ok":
        false, "error": {...}}`` or ``{"ok": true, "result": null, "skipped": true}``.
        Queued: the policy flushes at the end of the code run, before the model sees
        its result, and before a checkpoint."""
        body = {"skill": call.skill, "args": call.args, **outcome}
        if call.next:
            body["next"] = True
        self.run.write(self.path, call.key, "call", body)  # one call less than self.write: once per host call

    def decision_for(self, call: HostCall) -> tuple[str, Any] | None:
        """The human's decision on ``call``, when it is the one a resumed run waited for:
        ``(action, detail)``, detail the reason of a denial or the supplied result."""
        pending = self._pending(call.step)
        if pending is None or _content(pending["skill"], pending.get("args")) != _content(call.skill, call.args):
            return None
        decision: dict[str, Any] = self.run.checkpoint.decision or {}  # type: ignore[union-attr]
        action = str(decision.get("action"))
        return action, decision.get("result") if action == "result" else decision.get("reason")

    def _pending(self, step: int) -> dict[str, Any] | None:
        pending = self.run.pending
        if pending is None or pending.get("agent") != self.path or pending.get("step") != step:
            return None
        return pending

    def _expected_calls(self, step: int) -> list[_Expected]:
        expected = self._expected.get(step)
        if expected is None:
            prefix = f"h.{step}."
            expected = self._expected[step] = sorted(
                (
                    _Expected(int(key[len(prefix) :]), _content(e.body["skill"], e.body.get("args")), e)
                    for key, e in self.entries.items()
                    if key.startswith(prefix)
                ),
                key=lambda item: item.index,
            )
        return expected


#: The journal's encoder, made once (``json.dumps`` with options builds one per entry);
#: what is not JSON raises, and is journaled as the error the code got.
_encode = encoder(ensure_ascii=False, separators=(",", ":"))


def _write_batch(
    store: StateStore,
    run_id: str,
    invocation: dict[str, Any] | None,
    rows: list[QueuedEntry],
    writes: list[Callable[[], None]],
) -> None:
    """One batch, inside one transaction on the store's thread: the run's
    ``invocation`` (its checkpoint, the first time), the queued entries, then the other
    ``writes``."""
    if invocation is not None:
        store.journal.begin(run_id, invocation)
    if rows:
        _write_rows(store, run_id, rows)
    for write in writes:
        write()


def _write_rows(store: StateStore, run_id: str, rows: list[QueuedEntry]) -> None:
    """Serialize and write queued entries (on the store's thread). A host call whose
    result is not JSON is journaled as the error the agent code got for it."""
    encoded = []
    for agent, key, kind, body, at in rows:
        try:
            text = _encode(body)
        except (TypeError, ValueError) as exc:
            problem = f"{body.get('skill')!r} returned a value that is not JSON: {exc}"
            error = {"skill": body.get("skill"), "args": body.get("args"), "ok": False,
                     "error": {"type": "ResultInvalid", "message": problem}}  # fmt: skip
            text = json.dumps(error, ensure_ascii=False, separators=(",", ":"), default=repr)
        encoded.append((agent, key, kind, text, at))
    store.journal.add_rows(run_id, encoded)


def replay(entry: JournalEntry) -> Any:
    """A journaled host call's outcome, again: its result, or its error raised."""
    body = entry.body
    if body.get("ok"):
        return body.get("result")
    error = body.get("error") or {}
    raise ReplayedError(str(error.get("type") or "HostError"), str(error.get("message") or ""))


def failure(exc: BaseException) -> dict[str, Any]:
    """A host call's error as the agent code saw it, for the journal."""
    type_name = getattr(exc, "type_name", None) or type(exc).__name__
    return {"ok": False, "error": {"type": type_name, "message": str(exc)}}


def invocation_of(root: Context) -> dict[str, Any]:
    """How to invoke a run's root again: its skill (by name, or file), args, call
    config, session (and whether off the record) and attachments, and where skills were found; for
    deferred work (a scheduled
    run), the skill it runs and the ``authority`` it runs under. ``skill`` is None when
    it cannot be invoked again (an anonymous skill, a callback), with ``why``."""
    cm = root.manager.context_manager
    skill = root.skill
    data: dict[str, Any] = {
        "name": skill.name,
        "args": root.args,
        "config": root.internals.get("config"),
        "session": root.internals.get("session"),
        **({"read_only": True} if root.internals.get("read_only") else {}),
        "attachments": root.internals.get("attachments"),
        "path": [str(path) for path in cm.path_dirs()],
        "cwd": str(cm.cwd),
    }
    delegation = root.internals.get(DELEGATION)
    if isinstance(delegation, Delegation):
        authority = delegation.authority.to_json()
        data.update(name=delegation.ref, skill=delegation.ref, args=delegation.args, authority=authority)
    elif skill.kind in ("anonymous", "callback"):
        data.update(skill=None, why=f"its root invocation ran an {skill.kind} skill, which cannot be invoked again")
    elif cm.catalog.skills.get(skill.name) is skill:
        data["skill"] = skill.name
    elif skill.path:
        data["skill"] = "file://" + skill.path
    else:
        data.update(skill=None, why=f"its root skill {skill.name!r} is not on the search path")
    try:
        json.dumps(data)
    except (TypeError, ValueError) as exc:
        data = {"skill": None, "name": skill.name, "why": f"its root invocation's args or config are not JSON ({exc})"}
    return data


def _content(skill: str, args: Any) -> str:
    return skill + "\0" + json.dumps(args, sort_keys=True, ensure_ascii=False, default=repr)


def _describe(body: dict[str, Any]) -> str:
    return f"{body.get('skill')} {_short(body.get('args'))}"


def _short(value: Any, limit: int = 200) -> str:
    text = json.dumps(value, ensure_ascii=False, default=repr)
    return text if len(text) <= limit else text[: limit - 1] + "…"


async def resume(cm: ContextManager, run_id: str, **options: Any) -> Any:
    """Take a run up again (``cm.resume``): invoke its root as it was invoked the first
    time, in the same run, with its journal to replay. Deferred work runs under its
    maker's authority again; a run imported from a file is checked again and runs
    unattended (:func:`~agent_apps.state.run_snapshot.check_imported`)."""
    from ..run_record import RunRecord
    from ..state.run_snapshot import check_imported
    from ..tools import approval

    store = cm.state
    run, point = await store.call(store.journal.claim, run_id)
    try:
        entries = await store.call(store.journal.entries, run.id)
        journal = RunJournal(store, run.id, checkpoint=point, entries=entries)
        invocation = point.invocation
        internals = {**(options.pop("internals", None) or {}), _ROOT_KEY: journal}
        for key in ("config", "session", "read_only", "attachments"):  # off the record the first time: off it again
            if invocation.get(key) and key not in options:
                options[key] = invocation[key]
        authority = Authority.from_json(invocation.get("authority"))
        run_options = {"run": RunRecord(run.id, tenant_id=run.tenant_id), "internals": internals, **options}
        if not invocation.get("imported"):
            return await invoke_as(cm, authority, invocation["skill"], invocation.get("args"), **run_options)
        check_imported(invocation, cm.catalog.skills, source=f"run {run.id} (imported)", stored=True)
        with approval.session(mode="unattended"):
            return await cm.invoke(invocation["skill"], invocation.get("args"), **run_options)
    finally:  # a root that failed before any agent settled the run's status
        await store.call(store.journal.release, run.id)


#: ``cm.approve(run_id)`` without ``result=``: the call is made (not answered).
NO_RESULT: Any = object()


def decide(
    cm: ContextManager, run_id: str, *, deny: str | None = None, skip: bool = False, result: Any = NO_RESULT
) -> Checkpoint:
    """Record the decision on the call a run waits for (``cm.approve``)."""
    supplied = result is not NO_RESULT
    if (deny is not None) + skip + supplied > 1:
        raise ValueError("a call is either denied, skipped or given a result: one of them")
    if supplied:
        try:
            json.dumps(result)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"result must be JSON (the journal keeps it): {exc}") from None
        return cm.state.journal.decide(run_id, "result", result=result)
    action = "skip" if skip else "approve" if deny is None else "deny"
    return cm.state.journal.decide(run_id, action, deny)
