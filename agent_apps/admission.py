"""Admission control: how many agent runs hold a live sandbox, and how many model calls
each provider makes at once (docs/supervision.md).

Config (``admission`` in any config file of the manager, not per skill)::

    admission:
      sandboxes: 8               # agent runs holding a live sandbox at once (default: derived)
      model_calls: 16            # concurrent model calls per provider, or per name:
      # model_calls: {default: 16, agent-strands: 4}

The default of ``sandboxes`` is derived from the machine (:func:`machine_sandboxes`):
:data:`SANDBOXES_PER_CPU` per CPU this process may use, at most one per
:data:`MB_PER_SANDBOX` of the memory still available (a container's limits included).

Runs that wait are served by priority (``model.priority``: ``background`` .. ``critical``),
then in the order they arrived. A wait ends early when the run is cancelled.

**No deadlock on nested agents.** An agent started below a run that holds a sandbox
(from its code, a guardrail, a middleware agent serving a call) never waits for a
sandbox: its ancestor cannot give its slot back before the child ends, so waiting could
block the tree forever. It takes a slot beyond the bound instead, and the bound keeps
new trees out until the total is below it again. Such agents are bounded by the spawn
budget (``model.spawn``). Model-call slots are held only while a model call is in
flight, which never waits for anything else, so everyone waits for those.

This module is a layer above the sandbox package: it counts runs, it does not manage
sandboxes.
"""

from __future__ import annotations

import asyncio
import contextvars
import heapq
import itertools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from . import machine
from .budget import PRIORITIES
from .errors import ConfigError

if TYPE_CHECKING:
    from .config import Cascade
    from .context import Signal

__all__ = [
    "DEFAULT_MODEL_CALLS",
    "MB_PER_SANDBOX",
    "SANDBOXES_PER_CPU",
    "Admission",
    "Gate",
    "default_sandboxes",
    "inside_admitted_run",
    "machine_sandboxes",
    "mark_admitted",
]

DEFAULT_MODEL_CALLS = 16
_RANK = {name: rank for rank, name in enumerate(PRIORITIES)}
#: Live sandboxes per CPU by default. A run's sandbox and host side share one event
#: loop thread; runs waiting for a model hold theirs idle, so a CPU keeps several busy.
#: Past that, more live sandboxes add memory, not throughput: 500 scripted runs on 2
#: CPUs went as fast with 8 as with 32, in 46% of the memory (docs/supervision.md).
SANDBOXES_PER_CPU = 4
#: The memory a live sandbox slot claims when the default is derived: a run in flight
#: added ~10 MB (instance, its run's host side), and admission takes at most about a
#: quarter of what is available, leaving the rest to the skills, the store and others.
MB_PER_SANDBOX = 64
#: The default's floor: a nested agent takes a slot beyond the bound anyway, but a tree
#: of two should not queue behind one run on a small machine.
_MIN_SANDBOXES = 2


def default_sandboxes(cpus: int, available: int | None) -> int:
    """The default of ``admission.sandboxes`` for a machine with ``cpus`` usable CPUs and
    ``available`` bytes of memory left (None: unknown, no memory bound):
    :data:`SANDBOXES_PER_CPU` per CPU, at most one per :data:`MB_PER_SANDBOX` of
    available memory, never fewer than two."""
    by_cpu = SANDBOXES_PER_CPU * max(cpus, 1)
    by_memory = by_cpu if available is None else available // (MB_PER_SANDBOX * 2**20)
    return max(_MIN_SANDBOXES, min(by_cpu, by_memory))


def machine_sandboxes() -> int:
    """:func:`default_sandboxes` for this machine (CPU affinity and quota, MemAvailable
    and a cgroup limit: :mod:`agent_apps.machine`)."""
    return default_sandboxes(machine.usable_cpus(), machine.available_memory())


#: Set in every task that runs below an agent run holding a sandbox slot.
_admitted: contextvars.ContextVar[bool] = contextvars.ContextVar("agent_apps_admitted", default=False)


def inside_admitted_run() -> bool:
    """Whether the current task runs below an agent run that holds a sandbox slot."""
    return _admitted.get()


def mark_admitted() -> None:
    """The current task runs below an admitted run (a call from its sandboxed code,
    which runs as a task of its own): agents it starts never wait for a sandbox."""
    _admitted.set(True)


class Gate:
    """A bounded number of slots; waiters are served by priority, then arrival."""

    def __init__(self, size: int, name: str) -> None:
        self.size = size
        self.name = name
        self.in_use = 0
        #: The most slots ever in use at once (benchmarks and tests read it).
        self.peak = 0
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        self._arrivals = itertools.count()

    @property
    def waiting(self) -> int:
        return sum(1 for *_, future in self._waiters if not future.done())

    async def acquire(self, priority: str = "normal", signal: Signal | None = None, *, wait: bool = True) -> None:
        """Take a slot, waiting for one when all are in use (unless ``wait`` is false:
        then take one beyond the bound). Cancelling ``signal`` ends the wait with
        :class:`~agent_apps.errors.Cancelled`."""
        if not wait or (self.in_use < self.size and not self.waiting):
            self._take()
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (-_RANK.get(priority, _RANK["normal"]), next(self._arrivals), future))
        try:
            await (signal.guard(future) if signal is not None else future)
        except BaseException:
            if future.done() and not future.cancelled():
                self.release()  # granted just as the wait was cancelled: give it back
            else:
                future.cancel()
            raise

    def release(self) -> None:
        """Give a slot back; the best waiter gets it."""
        self.in_use -= 1
        while self._waiters and self.in_use < self.size:
            *_, future = heapq.heappop(self._waiters)
            if not future.done():
                self._take()
                future.set_result(None)

    def _take(self) -> None:
        self.in_use += 1
        self.peak = max(self.peak, self.in_use)


class Admission:
    """The gates of one ContextManager: live sandboxes, and model calls per provider."""

    def __init__(self, sandboxes: int | None = None, model_calls: Mapping[str, int] | int = DEFAULT_MODEL_CALLS):
        """``sandboxes``: None derives the bound from this machine (:func:`machine_sandboxes`)."""
        self.sandboxes = Gate(machine_sandboxes() if sandboxes is None else sandboxes, "sandboxes")
        calls = {"default": model_calls} if isinstance(model_calls, int) else dict(model_calls)
        self._model_call_sizes = {"default": DEFAULT_MODEL_CALLS, **calls}
        self._model_calls: dict[str, Gate] = {}

    def model_calls(self, provider: str) -> Gate:
        """The gate of ``provider``'s model calls."""
        gate = self._model_calls.get(provider)
        if gate is None:
            size = self._model_call_sizes.get(provider, self._model_call_sizes["default"])
            gate = self._model_calls[provider] = Gate(size, f"model calls of {provider}")
        return gate

    async def admit_run(self, priority: str, signal: Signal | None) -> contextvars.Token[bool]:
        """A sandbox slot for an agent run (no wait below an admitted run); returns the
        token that :meth:`leave_run` needs."""
        await self.sandboxes.acquire(priority, signal, wait=not _admitted.get())
        return _admitted.set(True)

    def leave_run(self, token: contextvars.Token[bool]) -> None:
        self.sandboxes.release()
        _admitted.reset(token)

    @classmethod
    def from_cascade(cls, cascade: Cascade) -> Admission:
        """The ``admission`` settings of the manager's config files (defaults, user,
        project), checked: a bad value names the file that set it."""
        sandboxes: Any = None
        model_calls: Any = DEFAULT_MODEL_CALLS
        for layer in cascade.base_layers():
            section = layer.data.get("admission")
            if section is None:
                continue
            if not isinstance(section, Mapping):
                raise ConfigError("admission must be a mapping", path=layer.source)
            for key, value in section.items():
                if key == "sandboxes":
                    sandboxes = _positive(value, "admission.sandboxes", layer.source)
                elif key == "model_calls" and isinstance(value, Mapping):
                    base = model_calls if isinstance(model_calls, dict) else {"default": model_calls}
                    where = "admission.model_calls."
                    model_calls = {**base, **{str(k): _positive(v, where + k, layer.source) for k, v in value.items()}}
                elif key == "model_calls":
                    model_calls = _positive(value, "admission.model_calls", layer.source)
                else:
                    raise ConfigError(
                        f"admission: unknown key {key!r}; known: sandboxes, model_calls", path=layer.source
                    )
        return cls(sandboxes, model_calls)


def _positive(value: Any, key: str, source: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{key} must be a whole number >= 1, not {value!r}", path=source)
    return value
