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
import contextvars
import json
import time
from collections.abc import Mapping
from typing import Any

from ._calls import CallHost
from ._core import Core, Trapped
from ._limits import DEFAULT_LIMITS, RunResult, SandboxLimits


class Sandbox:
    """A persistent CPython-in-WebAssembly interpreter for agent code."""

    def __init__(self, core: Core, *, memory: Mapping[str, Any] | None = None,
                 limits: SandboxLimits | None = None, call_host: CallHost | None = None,
                 caller_name: str = "agent code", target: Mapping[str, Any] | None = None) -> None:
        """Wrap a ready ``Core``; use ``await Sandbox.start(...)`` or a pool instead."""
        self._core = core
        self._lock = asyncio.Lock()
        self._memory_cache: tuple[str, Any] | None = None
        core.calls.call_host = call_host
        core.calls.caller_name = caller_name
        target_json = None if target is None else json.dumps({"skill": target["skill"], "args": target["args"]})
        self.limits = limits or DEFAULT_LIMITS
        core.limits = self.limits
        if memory is not None and not (type(memory) is dict and not memory):
            try:
                seed = json.dumps(dict(memory))
            except (TypeError, ValueError) as e:
                raise TypeError(f"the memory seed must be a JSON-serializable dict: {e}") from None
        else:
            seed = "{}"
        core.seed(seed, target_json)

    @classmethod
    async def start(cls, memory: Mapping[str, Any] | None = None, limits: SandboxLimits | None = None,
                    call_host: CallHost | None = None, *, caller_name: str = "agent code",
                    target: Mapping[str, Any] | None = None) -> Sandbox:
        """Start a new sandbox (about 1-3 ms with the component cached; the very
        first use in a process also loads the compiled component, and the first
        use on a machine builds it, see _build.BUILD_TIME, with its phases on stderr)."""
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
        lock = self._lock
        await lock.acquire()  # no `async with`: two coroutines fewer per run
        try:
            core = self._core
            if core.closed:
                raise RuntimeError("the sandbox is closed")
            core.calls.context = contextvars.copy_context()
            t0 = time.perf_counter()
            try:
                outcome = await core.run(code, float(timeout or self.limits.timeout), clock_json, batch)
            finally:
                core.calls.cancel_all()
            duration = time.perf_counter() - t0
        finally:
            lock.release()
        if batch is None or not isinstance(outcome, dict):
            return [_result(outcome, duration)] * count
        parts = [_result(part, duration) for part in outcome.get("batch") or ()][:count]
        missing = RunResult(error="SandboxError: the sandbox runtime returned no result for this call")
        return parts + [missing] * (count - len(parts))

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
        """Stop any running code (it ends within a tick) and free the instance."""
        self._core.close()

    def close_sync(self) -> None:
        self._core.close()

    async def __aenter__(self) -> Sandbox:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def __del__(self) -> None:
        core = getattr(self, "_core", None)
        if core is not None and not core.closed:
            core.close()


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
    """A new instantiated Core: ~1 ms of wasm on the loop's thread (the first use in a
    process loads the compiled component first, off the loop)."""
    if _runtime_missing():
        core = await asyncio.get_running_loop().run_in_executor(None, Core)
    else:
        core = Core()
    core.instantiate()
    return core


def _runtime_missing() -> bool:
    from . import _engine

    return _engine._runtime is None
