"""``SandboxPool``: instances made ahead of time, so a new agent never waits.

Instantiating and warming an instance costs a few milliseconds of wasm work; the
pool keeps ``size`` of them ready and refills on background threads after each
``acquire`` (the instance is then run by the event loop's thread). A pooled
instance is configured (limits, memory seed, host function) at acquire time
without running wasm: the seed travels with the first run.
"""

from __future__ import annotations

import asyncio
import collections
import threading
from collections.abc import Mapping
from typing import Any

from ._calls import CallHost
from ._core import Core
from ._host import Sandbox, new_core
from ._limits import SandboxLimits

REFILL_DELAY = 0.02


class SandboxPool:
    def __init__(self, size: int = 2, *, limits: SandboxLimits | None = None, prefill: bool = True) -> None:
        """``limits`` are the defaults for acquired sandboxes; ``prefill`` starts
        instantiating right away (in background threads)."""
        if size < 0:
            raise ValueError("pool size must be >= 0")
        self.size = size
        self.limits = limits
        self._ready: collections.deque[Core] = collections.deque()
        self._filling = 0
        self._lock = threading.Lock()
        self._closed = False
        if prefill:
            self._refill()

    def _refill(self) -> None:
        with self._lock:
            want = self.size - len(self._ready) - self._filling
            if self._closed or want <= 0:
                return
            self._filling += want
        for _ in range(want):
            threading.Thread(target=self._make_one, name="agent-apps-sandbox-pool", daemon=True).start()

    def _make_one(self) -> None:
        core = None
        try:
            core = Core()
            core.instantiate()
            core.warm_up()
        except BaseException:
            if core is not None:
                core.close()
            core = None
        with self._lock:
            self._filling -= 1
            if core is not None and not self._closed:
                self._ready.append(core)
                core = None
        if core is not None:
            core.close()

    @property
    def ready(self) -> int:
        return len(self._ready)

    async def wait_ready(self, timeout: float = 60.0) -> None:
        """Wait until the pool is full (benchmarks, tests)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        self._refill()
        while len(self._ready) < self.size:
            if loop.time() > deadline:
                raise TimeoutError("the sandbox pool did not fill in time")
            if self._filling == 0:
                self._refill()
            await asyncio.sleep(0.005)

    async def acquire(self, memory: Mapping[str, Any] | None = None, limits: SandboxLimits | None = None,
                      call_host: CallHost | None = None, *, caller_name: str = "agent code",
                      target: Mapping[str, Any] | None = None) -> Sandbox:
        """A ready sandbox with this memory seed, limits, host function and (for an
        agent serving as middleware) ``target``, the call it serves."""
        if self._closed:
            raise RuntimeError("the sandbox pool is closed")
        try:
            core = self._ready.popleft()
        except IndexError:
            core = None
        if core is None:
            self._refill()
            core = await new_core()
        else:
            # Refill a little later: starting a thread and instantiating now would
            # compete with the first run of the sandbox just handed out.
            asyncio.get_running_loop().call_later(REFILL_DELAY, self._refill)
        return Sandbox(core, memory=memory, limits=limits or self.limits, call_host=call_host,
                       caller_name=caller_name, target=target)

    async def close(self) -> None:
        with self._lock:
            self._closed = True
            cores = list(self._ready)
            self._ready.clear()
        for core in cores:
            core.close()

    async def __aenter__(self) -> SandboxPool:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()
