"""``Sandbox``: the asyncio-facing handle on one sandbox (see ``_core`` for the wasm side).

Usage::

    sb = await Sandbox.start(memory={"seed": 1}, limits=SandboxLimits(timeout=10),
                             call_host=call_host)
    res = await sb.run("x = await ctx.manager.invoke('word-count', {'text': 'a b'})\\nx")
    sb.memory            # last JSON snapshot of the guest's `memory`
    await sb.close()

``call_host(name, args)`` is an async function (a plain function works too)
that performs ONE call on behalf of the guest and returns a JSON-serializable
result or raises; the exception's class name and message reach the guest as an
exception of that name (a subclass of ``HostError``). Names that are not bare
skill names are refused before ``call_host`` is called. A call that carries
options gets them as keywords: ``call_host(name, args, middleware=[...])`` for
``ctx.manager.invoke(name, args, middleware=[...])``, and ``call_host(name, args,
next=True)`` for ``ctx.manager.next(args)`` when a ``target`` was given (the call
an agent serves as middleware: ``{"skill": name, "args": {...}}``).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import time
from collections.abc import Mapping
from typing import Any

from ..errors import SandboxError
from ._core import CallHost, Core, Trapped, refuse_if_too_many_stuck
from ._limits import RunResult, SandboxLimits

#: How long past its time limit a run may take before the host gives up on its
#: worker thread (only a guest blocked inside a host call gets there).
WATCHDOG_GRACE = 2.0
_STUCK = object()


class Sandbox:
    """A persistent CPython-in-WebAssembly interpreter for agent code."""

    def __init__(self, core: Core, *, memory: Mapping[str, Any] | None = None,
                 limits: SandboxLimits | None = None, call_host: CallHost | None = None,
                 caller_name: str = "agent code", target: Mapping[str, Any] | None = None) -> None:
        """Wrap a ready ``Core``; use ``await Sandbox.start(...)`` or a pool instead."""
        try:
            refuse_if_too_many_stuck()
        except SandboxError:
            core.stop_thread()
            raise
        self._core = core
        self._lock = asyncio.Lock()
        self._broken: str | None = None  # why a stuck sandbox could not be replaced
        self._memory_cache: tuple[str, Any] | None = None
        core.call_host = call_host
        core.caller_name = caller_name
        core.target_json = None if target is None else json.dumps({"skill": target["skill"], "args": target["args"]})
        self.limits = limits or SandboxLimits()
        core.limits = self.limits
        if memory is not None:
            try:
                seed = json.dumps(dict(memory))
            except (TypeError, ValueError) as e:
                raise TypeError(f"the memory seed must be a JSON-serializable dict: {e}") from None
        else:
            seed = "{}"
        core.memory_json = seed
        core.pending_setup = core.setup_json(memory=True)

    @classmethod
    async def start(cls, memory: Mapping[str, Any] | None = None, limits: SandboxLimits | None = None,
                    call_host: CallHost | None = None, *, caller_name: str = "agent code",
                    target: Mapping[str, Any] | None = None) -> Sandbox:
        """Start a new sandbox (about 1-3 ms with the component cached; the very
        first use in a process also loads the compiled component, and the first
        use on a machine builds it, ~20 s, with a message on stderr)."""
        core = await new_core()
        return cls(core, memory=memory, limits=limits, call_host=call_host, caller_name=caller_name, target=target)

    # -- running code ---------------------------------------------------------------------

    async def run(
        self, code: str, timeout: float | None = None, *, clock: Mapping[str, Any] | None = None
    ) -> RunResult:
        """Run agent code; never raises for errors of the code itself (see RunResult).

        ``clock`` (``{"time": seconds, "seed": int}``) fixes what the code's clock and
        ``random`` start from, so a replayed run sees the same values (see
        ``guest/sandbox_guest/_clock.py``); without it they are the real ones."""
        if not isinstance(code, str):
            raise TypeError(f"code must be a str, not {type(code).__name__}")
        return (await self._run(code, timeout, None, clock))[0]

    async def run_batch(
        self,
        codes: list[str],
        timeouts: list[float | None] | None = None,
        *,
        clock: Mapping[str, Any] | None = None,
    ) -> list[RunResult]:
        """Run several pieces of code concurrently, as tasks on the guest's event loop
        (one interpreter: their host calls overlap, their Python does not), each with
        its own output, value, error, ``finish()`` and time limit (``timeouts[i]``
        seconds); they share ``memory`` and ``clock`` (as for :meth:`run`). The run's
        own limit is the sandbox's timeout."""
        if not codes or not all(isinstance(code, str) for code in codes):
            raise TypeError("codes must be a non-empty list of str")
        batch = json.dumps({"batch": codes, "timeouts": list(timeouts or [None] * len(codes))})
        return await self._run("", None, batch, clock, len(codes))

    async def _run(
        self, code: str, timeout: float | None, batch: str | None, clock: Mapping[str, Any] | None, count: int = 1
    ) -> list[RunResult]:
        clock_json = None if clock is None else json.dumps({"time": float(clock["time"]), "seed": int(clock["seed"])})
        async with self._lock:
            core = self._core
            if self._broken is not None:
                raise SandboxError(f"this sandbox was closed: it got stuck and {self._broken}")
            if core.closed:
                raise RuntimeError("the sandbox is closed")
            refuse_if_too_many_stuck()
            loop = asyncio.get_running_loop()
            core.loop = loop
            core.context = contextvars.copy_context()
            fut = loop.create_future()

            def done(ok: bool, result: Any) -> None:
                loop.call_soon_threadsafe(_resolve, fut, ok, result)

            t0 = time.perf_counter()
            limit = float(timeout or self.limits.timeout)
            seq = core.next_seq()
            core.submit(core.run, code, limit, seq, clock_json, batch, done=done)
            # Watchdog: epoch interruption cannot reach a guest blocked inside a
            # host call (a WASI wait the guest runtime did not reroute).
            watchdog = loop.call_later(limit + WATCHDOG_GRACE, _resolve, fut, True, _STUCK)
            try:
                outcome = await asyncio.shield(fut)
            except asyncio.CancelledError:
                core.interrupt("the run was cancelled", seq=seq)
                try:
                    await asyncio.wait_for(asyncio.shield(fut), WATCHDOG_GRACE)  # stops within a tick
                except TimeoutError:
                    with contextlib.suppress(SandboxError):  # too many stuck: stays closed
                        await self._replace_stuck_core()
                except BaseException:
                    pass
                raise
            finally:
                watchdog.cancel()
                core.cancel_calls()
            if outcome is _STUCK:
                try:
                    await self._replace_stuck_core()
                except SandboxError as exc:
                    self._broken = str(exc)
                    broken = RunResult(
                        error=f"TimeoutError: the code was blocked in a system call past its time limit of "
                        f"{limit:g} s (timeout) and was stopped; the sandbox cannot be replaced: {exc}",
                        duration=time.perf_counter() - t0,
                    )
                    return [broken] * count
                stuck = RunResult(
                    error=(
                        f"TimeoutError: the code was blocked in a system call past its time limit "
                        f"of {limit:g} s (timeout) and was stopped"
                    ),
                    replaced=True,
                    notice=(
                        "the sandbox was reset after the time limit; memory restored from its last "
                        "saved state (the end of the previous run)"
                    ),
                    duration=time.perf_counter() - t0,
                )
                return [stuck] * count
            duration = time.perf_counter() - t0
            if batch is None or not isinstance(outcome, dict):
                return [_result(outcome, duration)] * count
            parts = [_result(part, duration) for part in outcome.get("batch") or ()][:count]
            missing = RunResult(error="SandboxError: the sandbox runtime returned no result for this call")
            return parts + [missing] * (count - len(parts))

    async def _replace_stuck_core(self) -> None:
        """Abandon a worker stuck in a host call; carry the sandbox's state to a new one
        (unless too many workers are stuck: then the sandbox stays closed)."""
        old = self._core
        old.abandon()
        refuse_if_too_many_stuck()
        new = await new_core()
        new.call_host = old.call_host
        new.caller_name = old.caller_name
        new.limits = old.limits
        new.target_json = old.target_json
        new.memory_json = old.memory_json
        new.pending_setup = new.setup_json(memory=True)
        self._core = new

    def interrupt(self) -> None:
        """Stop the running code promptly (thread-safe); its run reports an error."""
        self._core.interrupt("the run was interrupted")

    @property
    def memory(self) -> dict[str, Any]:
        """The last JSON-serializable snapshot of the guest's ``memory`` dict."""
        snap = self._core.memory_json
        if self._memory_cache is None or self._memory_cache[0] is not snap:
            self._memory_cache = (snap, json.loads(snap))
        return self._memory_cache[1]

    @property
    def closed(self) -> bool:
        return self._core.closed

    async def close(self) -> None:
        """Stop any running code, then free the instance and its thread."""
        core = self._core
        if core.closed:
            return
        core.stop_thread()
        await asyncio.get_running_loop().run_in_executor(None, core.join)

    def close_sync(self) -> None:
        self._core.stop_thread()
        self._core.join()

    async def __aenter__(self) -> Sandbox:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def __del__(self) -> None:
        core = getattr(self, "_core", None)
        if core is not None and not core.closed:
            core.stop_thread()


def _resolve(fut: asyncio.Future, ok: bool, result: Any) -> None:
    if fut.done():
        return
    if ok:
        fut.set_result(result)
    else:
        fut.set_exception(result) if not isinstance(result, Trapped) else fut.set_result(result)


def _result(outcome: Any, duration: float) -> RunResult:
    if isinstance(outcome, Trapped):
        return RunResult(
            error=outcome.error,
            replaced=True,
            notice=(
                f"the sandbox was reset after {outcome.reason}; memory restored from its last "
                "saved state (the end of the previous run)"
            ),
            duration=duration,
        )
    return RunResult(
        value=outcome.get("value"),
        finished=outcome["finished"],
        output=outcome.get("output") or "",
        error=outcome.get("error"),
        calls=outcome.get("calls", 0),
        duration=duration,
    )


async def new_core() -> Core:
    """Create a Core (loading the runtime if needed) and instantiate it, off the loop."""
    loop = asyncio.get_running_loop()
    core = await loop.run_in_executor(None, Core) if _runtime_missing() else Core()
    fut = loop.create_future()

    def done(ok: bool, result: Any) -> None:
        loop.call_soon_threadsafe(_resolve, fut, ok, result)

    core.submit(core.instantiate, done=done)
    try:
        await fut
    except BaseException:
        core.stop_thread()
        raise
    return core


def _runtime_missing() -> bool:
    from . import _engine

    return _engine._runtime is None
