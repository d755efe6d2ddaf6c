"""Many runs of one skill in this process: bounded concurrency, results as they finish.

One input is one top-level invocation, recorded under a run id of its own and run
unattended (a call the permission policy would ask about checkpoints the run, as the
scheduler's runs do). An input that cannot run, or a run that fails, is that input's
error: the batch goes on. The results come back in completion order, each with the
index of its input. An input that carries the run an earlier attempt started is taken
up from that run's journal (:func:`_take_up`), so nothing journaled happens twice.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, AsyncIterable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import AgentAppsError, ApprovalPending
from ..machine import available_memory, usable_cpus

if TYPE_CHECKING:
    from ..manager import ContextManager
    from ..skill import Skill

__all__ = [
    "RUNS_PER_CPU",
    "BatchInput",
    "BatchResult",
    "aiter_inputs",
    "default_concurrency",
    "rejected",
    "run_local",
    "run_one",
]

#: Runs in flight per CPU by default: an agent run spends most of its time waiting for
#: the model, so a CPU serves several.
RUNS_PER_CPU = 4
#: What one run in flight costs besides its sandbox's memory limit (the host side of
#: the run: provider, messages, trace).
_RUN_OVERHEAD_MB = 32


@dataclass(frozen=True, slots=True)
class BatchInput:
    """One run to make: ``args`` for the skill, at ``index``; or ``error``, why this
    input cannot run (it was not JSON, not an object), reported as its result.

    ``batch``: the results file (absolute path) the run is recorded for in the state
    store (``store.batch_runs``) before it starts, with ``input_hash``; ``run_id``: the
    run an earlier attempt of this input started, to take up instead of a new one
    (``agent-apps batch --resume``).
    """

    index: int
    args: Any = None
    error: str | None = None
    batch: str | None = None
    input_hash: str | None = None
    run_id: str | None = None


@dataclass(frozen=True, slots=True)
class BatchResult:
    """The outcome of one input. ``ok``: ``result`` holds the skill's result; else
    ``error`` is ``{"type", "message", ...}`` (the error's ``to_json()``).

    ``run_id``: the run it was recorded under (none for an input that could not run);
    ``seconds``: how long the run took; ``worker``: where it ran, on a Ray cluster
    (``{"node", "pid"}``).
    """

    index: int
    ok: bool
    result: Any = None
    error: dict[str, Any] | None = None
    run_id: str | None = None
    seconds: float = 0.0
    worker: dict[str, Any] | None = field(default=None, compare=False)

    def to_json(self) -> dict[str, Any]:
        """The result line of ``agent-apps batch``: ``{"index", "ok", "result" | "error", ...}``."""
        data: dict[str, Any] = {"index": self.index, "ok": self.ok}
        if self.ok:
            data["result"] = self.result
        else:
            data["error"] = self.error
        if self.run_id is not None:
            data["run_id"] = self.run_id
        data["seconds"] = round(self.seconds, 4)
        if self.worker is not None:
            data["worker"] = self.worker
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BatchResult:
        return cls(
            index=data["index"],
            ok=bool(data["ok"]),
            result=data.get("result"),
            error=data.get("error"),
            run_id=data.get("run_id"),
            seconds=float(data.get("seconds") or 0.0),
            worker=data.get("worker"),
        )


def as_input(position: int, item: Any) -> BatchInput:
    """An item of ``cm.batch(name, inputs)``: a :class:`BatchInput` as it is, anything
    else the args of the input at ``position``."""
    return item if isinstance(item, BatchInput) else BatchInput(position, item)


async def run_one(
    cm: ContextManager, skill: Skill, item: BatchInput, run_options: Mapping[str, Any] | None = None
) -> BatchResult:
    """Invoke ``skill`` with ``item``'s args and the batch's ``run_options`` (``config``,
    ``tenant``: what every run of the batch takes); never raises but cancellation.

    A served agent that stopped at a cap (``max_turns``, ``max_steps``) returned only
    partial work: that is a failure too (``{"type": "Stopped", "status", "partial"}``),
    as ``agent-apps invoke`` exits 1 for it.
    """
    from ..middleware import served_agent
    from ..run_record import RunRecord
    from ..tools import approval

    invalid = rejected(item)
    if invalid is not None:
        return invalid
    run = RunRecord.new() if item.run_id is None else RunRecord(item.run_id, trace_id=item.run_id)
    served: dict[str, Any] = {}
    options: dict[str, Any] = {**(run_options or {}), "run": run, "middleware": [served_agent(served)]}
    started = time.perf_counter()
    error: dict[str, Any] | None = None
    try:
        with approval.session(mode="unattended"):
            if item.run_id is not None:
                result = await _take_up(cm, skill, item, options)
            else:
                if item.batch is not None:  # recorded first: a crash from here on leaves a run to take up
                    store = cm.state
                    await store.call(store.batch_runs.start, item.batch, item.index, item.input_hash, run.run_id)
                result = await cm.invoke(skill, dict(item.args), **options)
    except ApprovalPending as exc:
        error = {**exc.to_json(), "status": "waiting-approval"}
    except AgentAppsError as exc:
        error = exc.to_json()
    except Exception as exc:  # a bug in one skill ends its input, not the batch
        error = {"type": type(exc).__name__, "message": str(exc)}
    else:
        status = served.get("status")
        if status not in (None, "done"):
            message = served.get("message") or status
            error = {"type": "Stopped", "status": status, "message": message, "partial": result}
    seconds = time.perf_counter() - started
    if error is not None:
        return BatchResult(item.index, False, error=error, run_id=run.run_id, seconds=seconds)
    return BatchResult(item.index, True, result=result, run_id=run.run_id, seconds=seconds)


async def _take_up(cm: ContextManager, skill: Skill, item: BatchInput, options: dict[str, Any]) -> Any:
    """Go on with the run an earlier attempt of ``item`` started (``--resume``): from its
    journal when it keeps one, as ``agent-apps resume`` does, so no journaled call is
    made again; from its start, under the same run id, when it has none (it never got
    to journal anything, or runs without a journal). A run still running in a live
    process, or one that ended before its result line was written, is not run again:
    that is the input's error."""
    from ..state.errors import NotFound, NotResumable
    from ..state.journal import FINISHED

    store = cm.state
    run_id = str(item.run_id)
    try:
        info = await store.call(store.runs.get, run_id)
    except NotFound:  # it never got as far as recording itself
        return await cm.invoke(skill, dict(item.args), **options)
    point = await store.call(store.journal.checkpoint, run_id)
    if info.status in FINISHED:
        raise NotResumable(
            "run", run_id, f"ended (status {info.status}) before its result line was written; its report has the "
            f"result (agent-apps runs show {run_id}): --rerun-failed runs it again",
        )
    if point is not None and point.invocation.get("skill"):
        return await cm.resume(run_id, middleware=options["middleware"])
    if not await store.call(store.runs.take_over, run_id):
        raise NotResumable("run", run_id, f"is still running (process {info.pid} on {info.host})")
    return await cm.invoke(skill, dict(item.args), **options)


def rejected(item: BatchInput) -> BatchResult | None:
    """The result of an input that cannot run (``InputInvalid``), else None."""
    if item.error is not None:
        return BatchResult(item.index, False, error={"type": "InputInvalid", "message": item.error})
    if not isinstance(item.args, Mapping):
        message = f"input {item.index}: expected a JSON object of args, got {_json_type(item.args)}"
        return BatchResult(item.index, False, error={"type": "InputInvalid", "message": message})
    return None


async def run_local(
    cm: ContextManager,
    skill: Skill,
    inputs: Iterable[Any] | AsyncIterable[Any],
    *,
    concurrency: int,
    run_options: Mapping[str, Any] | None = None,
) -> AsyncGenerator[BatchResult, None]:
    """Run every input, ``concurrency`` at a time, yielding results as they finish.

    Inputs are read only as runs finish, so a long input file is never held whole. When
    the consumer stops early (or the task is cancelled), the runs in flight are
    cancelled: their results are not yielded.
    """
    items = aiter_inputs(inputs)
    pending: set[asyncio.Task[BatchResult]] = set()
    exhausted = False
    try:
        while True:
            while not exhausted and len(pending) < concurrency:
                try:
                    item = await anext(items)
                except StopAsyncIteration:
                    exhausted = True
                    break
                pending.add(asyncio.create_task(run_one(cm, skill, item, run_options)))
            if not pending:
                return
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for result in sorted((task.result() for task in done), key=lambda r: r.index):
                yield result
    finally:
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=30)
        await items.aclose()


async def aiter_inputs(inputs: Iterable[Any] | AsyncIterable[Any]) -> AsyncGenerator[BatchInput, None]:
    """``inputs`` (sync or async) as :class:`BatchInput` items, read one at a time."""
    position = 0
    if isinstance(inputs, AsyncIterable):
        async for item in inputs:
            yield as_input(position, item)
            position += 1
    else:
        for item in inputs:
            yield as_input(position, item)
            position += 1


def default_concurrency(cm: ContextManager, skill: Skill) -> int:
    """What this machine holds: :data:`RUNS_PER_CPU` runs per CPU this process may use,
    but no more runs than the available memory holds if every run's sandbox grew to its
    whole ``model.sandbox.memory_mb`` limit (plus a little for the host side)."""
    by_cpu = RUNS_PER_CPU * usable_cpus()
    available = available_memory()
    if available is None:
        return by_cpu
    memory_mb = cm.config_for(skill).get("model.sandbox.memory_mb", 256)
    per_run = (int(memory_mb) + _RUN_OVERHEAD_MB) * 2**20
    return max(1, min(by_cpu, available // per_run))


def _json_type(value: Any) -> str:
    names = {list: "an array", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)
