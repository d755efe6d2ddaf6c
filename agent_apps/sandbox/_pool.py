"""``SandboxPool``: instances made ahead of time, so a new agent never waits.

Instantiating and warming an instance costs a few milliseconds of wasm work; the
pool keeps ``size`` of them ready and hands them out with ``acquire`` (the instance
is then run by the caller's event loop thread). A pooled instance is configured
(limits, memory seed, host function) at acquire time without running wasm: the seed
travels with the first run.

The refill runs on the pool's own thread, not on the caller's event loop: a caller
such as ``cm.invoke_sync`` closes its loop when its call ends, and a refill scheduled
on that loop never ran, so the next call made its own instance on its critical path.
The thread is independent of every loop, and makes one instance at a time, so it
takes at most one core from the calls running meanwhile. It starts
``REFILL_DELAY`` after an ``acquire`` that leaves an instance ready (the first run of
the sandbox just handed out goes first), and at once when the pool is empty.
An ``acquire`` that finds the pool empty waits for the instance the thread makes
next rather than making a second one on its own path: the thread may have paid
part of it already, the instance it gets is warmed (its first run is the faster
one), and the two do not compete for the CPU. One acquire waits per instance in
the making; another one meanwhile (a burst), and any with ``size=0`` or after a
failed instantiation, instantiates its own.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import threading
import time
from collections.abc import Mapping
from typing import Any

from ._calls import CallHost
from ._core import Core
from ._host import Sandbox, new_core
from ._limits import SandboxLimits

_Waiter = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Core | None]"]

#: Seconds after an ``acquire`` that leaves an instance ready before the refill starts.
REFILL_DELAY = 0.02


@dataclasses.dataclass
class PoolStats:
    """Counts since the pool was made: where ``acquire`` got its instances."""

    #: Instances the pool's thread made and warmed.
    made: int = 0
    #: Acquires served by a ready instance or one the thread was making.
    pooled: int = 0
    #: Acquires that instantiated their own instance on the caller's path.
    fresh: int = 0


class SandboxPool:
    def __init__(self, size: int = 2, *, limits: SandboxLimits | None = None, prefill: bool = True) -> None:
        """``limits`` are the defaults for acquired sandboxes; ``prefill`` starts
        instantiating right away (on the pool's thread)."""
        if size < 0:
            raise ValueError("pool size must be >= 0")
        self.size = size
        self.limits = limits
        self.stats = PoolStats()
        self._ready: collections.deque[Core] = collections.deque()
        #: Acquires waiting for the instance in the making, with their loops.
        self._waiters: collections.deque[_Waiter] = collections.deque()
        self._making = False  # the thread is instantiating one now
        self._due: float | None = None  # when the thread should next refill (monotonic)
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False
        if prefill:
            self._request(0.0)

    # -- the refill thread ---------------------------------------------------------------

    def _request(self, delay: float) -> None:
        """Ask the thread to refill ``delay`` seconds from now (or sooner if already due)."""
        with self._wake:
            if self._closed or self.size == 0:
                return
            due = time.monotonic() + delay
            if self._due is None or due < self._due:
                self._due = due
            if self._thread is None:
                self._thread = threading.Thread(target=self._fill, name="agent-apps-sandbox-pool", daemon=True)
                self._thread.start()
            self._wake.notify()

    def _fill(self) -> None:
        while True:
            with self._wake:
                while not self._closed:
                    wait = None if self._due is None else self._due - time.monotonic()
                    if wait is not None and wait <= 0:
                        break
                    self._wake.wait(wait)
                if self._closed:
                    return
                if len(self._ready) - len(self._waiters) >= self.size:
                    self._due = None  # full: nothing more until the next acquire
                    continue
                self._making = True
            core = _make_one()
            with self._wake:
                self._making = False
                if core is not None:
                    self.stats.made += 1
                    if not self._closed:
                        self._hand_over(core)
                        continue
                else:  # instantiation failed: waiting acquires make their own, the next acquire retries
                    self._due = None
                    self._fail_waiters()
                    continue
            core.close()  # made as the pool closed

    def _hand_over(self, core: Core) -> None:
        """Give ``core`` to the oldest waiting acquire, or keep it ready (lock held)."""
        while self._waiters:
            loop, fut = self._waiters.popleft()
            try:
                loop.call_soon_threadsafe(self._deliver, fut, core)
                return
            except RuntimeError:  # that caller's loop closed while it waited
                continue
        self._ready.append(core)

    def _deliver(self, fut: asyncio.Future[Core | None], core: Core) -> None:
        if fut.done():  # the acquire was cancelled meanwhile: the instance stays in the pool
            with self._wake:
                if self._closed:
                    core.close()
                else:
                    self._hand_over(core)
        else:
            fut.set_result(core)

    def _fail_waiters(self) -> None:
        """No instance is coming: waiting acquires make their own (lock held)."""
        while self._waiters:
            loop, fut = self._waiters.popleft()
            try:
                loop.call_soon_threadsafe(_none_coming, fut)
            except RuntimeError:  # that caller's loop closed while it waited
                pass

    # -- the API -------------------------------------------------------------------------

    @property
    def ready(self) -> int:
        return len(self._ready)

    async def wait_ready(self, timeout: float = 60.0) -> None:
        """Wait until the pool is full (benchmarks, tests)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        self._request(0.0)
        while len(self._ready) < self.size:
            if loop.time() > deadline:
                raise TimeoutError("the sandbox pool did not fill in time")
            if not self._making:
                self._request(0.0)
            await asyncio.sleep(0.005)

    async def acquire(self, memory: Mapping[str, Any] | None = None, limits: SandboxLimits | None = None,
                      call_host: CallHost | None = None, *, caller_name: str = "agent code",
                      target: Mapping[str, Any] | None = None) -> Sandbox:
        """A ready sandbox with this memory seed, limits, host function and (for an
        agent serving as middleware) ``target``, the call it serves."""
        if self._closed:
            raise RuntimeError("the sandbox pool is closed")
        core = await self._take()
        if core is None:
            self.stats.fresh += 1
            core = await new_core()
        else:
            self.stats.pooled += 1
        return Sandbox(core, memory=memory, limits=limits or self.limits, call_host=call_host,
                       caller_name=caller_name, target=target)

    async def _take(self) -> Core | None:
        """A pooled instance, waiting for the one in the making if none is ready; None
        when none is coming."""
        with self._wake:
            if self._ready:
                core, waiting = self._ready.popleft(), None
            elif self.size and not self._waiters:  # the thread makes one now; one waiter per instance
                loop = asyncio.get_running_loop()
                core, waiting = None, loop.create_future()
                self._waiters.append((loop, waiting))
            else:
                core = waiting = None
        # Refill a little later unless the pool is now empty: instantiating now would
        # compete with the first run of the sandbox just handed out.
        self._request(REFILL_DELAY if self._ready else 0.0)
        if waiting is None:
            return core
        try:
            return await waiting
        except asyncio.CancelledError:
            with self._wake:  # still in line: the instance in the making goes to the pool, not to us
                self._waiters = collections.deque(w for w in self._waiters if w[1] is not waiting)
            if waiting.done() and not waiting.cancelled() and (core := waiting.result()) is not None:
                self._deliver(waiting, core)  # cancelled once its instance was delivered: keep it
            raise

    async def close(self) -> None:
        with self._wake:
            self._closed = True
            cores = list(self._ready)
            self._ready.clear()
            self._fail_waiters()
            self._wake.notify()
        for core in cores:
            core.close()

    async def __aenter__(self) -> SandboxPool:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


def _make_one() -> Core | None:
    """An instantiated, warmed instance, or None if that failed."""
    core = None
    try:
        core = Core()
        core.instantiate()
        core.warm_up()
        return core
    except BaseException:
        if core is not None:
            core.close()
        return None


def _none_coming(fut: asyncio.Future[Core | None]) -> None:
    if not fut.done():
        fut.set_result(None)
