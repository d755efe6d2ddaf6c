"""``cm.stream(ref, args)``: a run's events as they happen, then its result.

::

    async with cm.stream("haiku", {"task": "a pond"}) as run:
        async for event in run:          # dicts with a "type", as --events prints them
            print(event["type"])
    print(run.status, run.result)        # after the loop: how it ended, what it returned

The run is an ordinary invocation (``cm.invoke``'s options apply) started when the
block is entered, with its events sent to a topic of its own that the stream reads. Its
``run_id`` is known at once (the stream mints it), so ``cm.stop(run.run_id)`` and
``cm.cancel(run.run_id)`` work from the first moment.

A slow reader: the stream holds at most :data:`BUFFER` events; when it is full the run
waits (bounded queue with backpressure, not dropping): every agent of the run awaits
the stream's flow control between steps (events.py, ``flow``), so memory stays bounded
and no event is lost, and a reader that stops reading pauses the run. Leaving the loop
before the end (``break``), or the block, cancels the run (status ``cancelled``).

Once the events are read the loop ends; if the run failed, the loop raises its error
then, as ``await cm.invoke(...)`` would (``run.error`` keeps it, ``run.status`` says how
it ended: ``done``, ``stopped``, ``max_turns``, ``error``, ``cancelled``, ...).
"""

from __future__ import annotations

import asyncio
import os
from collections import deque
from collections.abc import AsyncIterator
from types import TracebackType
from typing import TYPE_CHECKING, Any

from .context import Signal
from .errors import ApprovalPending, Cancelled
from .middleware import served_agent
from .run_record import RunRecord

if TYPE_CHECKING:
    from .manager import ContextManager

__all__ = ["BUFFER", "RunStream"]

#: Events a stream holds for a reader that is behind before the run waits for it.
BUFFER = 256


class RunStream:
    """One streamed run (see the module docstring)."""

    def __init__(self, cm: ContextManager, ref: Any, args: dict[str, Any] | None, options: dict[str, Any]) -> None:
        self.cm = cm
        self._ref, self._args, self._options = ref, args, options
        #: The run's id (``cm.stop``, ``cm.cancel``, ``runs show``).
        self.run_id = os.urandom(16).hex()  # a uuid4's randomness, without importing uuid
        self._events: deque[dict[str, Any]] = deque()
        self._served: dict[str, Any] = {}
        self._signal: Signal = options.get("signal") or Signal()
        self._task: asyncio.Future[Any] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._more: asyncio.Event | None = None  # events came, or the run ended
        self._room: asyncio.Event | None = None  # the reader is not behind
        self._unsubscribe: Any = None
        #: How the run ended, once it did (None before).
        self.status: str | None = None
        #: What it returned (None while it runs, or when it failed).
        self.result: Any = None
        #: What it raised, if it failed.
        self.error: BaseException | None = None

    async def __aenter__(self) -> RunStream:
        cm, options = self.cm, dict(self._options)
        self._loop = asyncio.get_running_loop()
        self._more, self._room = asyncio.Event(), asyncio.Event()
        self._room.set()
        topic = f"stream.{cm.id}.{self.run_id}"
        self._unsubscribe = cm.events.subscribe(topic, self._heard, flow=self._wait_room)
        nonlocals = dict(options.get("nonlocals") or {})
        nonlocals["agent"] = {**(nonlocals.get("agent") or {}), "events": topic}
        options.update(
            nonlocals=nonlocals,
            middleware=[*(options.get("middleware") or ()), served_agent(self._served)],
            signal=self._signal,
            run=RunRecord(self.run_id),
        )
        self._task = asyncio.ensure_future(cm.invoke(self._ref, self._args, **options))
        self._task.add_done_callback(lambda _task: self._more.set())  # type: ignore[union-attr]
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        task = self._task
        try:
            if task is not None and not task.done():
                self._signal.cancel("the stream was left before the run ended")
                self._room.set()  # type: ignore[union-attr]  # a run waiting for room goes on to see the cancel
                await asyncio.wait([task])
            if task is not None:
                self._settle(task)
        finally:
            if self._unsubscribe is not None:
                self._unsubscribe()

    def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        if self._task is None:
            raise RuntimeError("iterate a stream inside 'async with cm.stream(...) as run:'")
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[dict[str, Any]]:
        task, more, room = self._task, self._more, self._room
        assert task is not None and more is not None and room is not None
        try:
            while True:
                if self._events:
                    event = self._events.popleft()
                    if len(self._events) < BUFFER:
                        room.set()
                    yield event
                    continue
                if task.done():
                    break
                more.clear()
                await more.wait()
        finally:
            if not task.done():  # the reader left the loop early: the run ends
                self._signal.cancel("the stream's reader left before the run ended")
                room.set()
        self._settle(task)
        if self.error is not None:
            raise self.error

    # -- the run's side ----------------------------------------------------------------

    def _heard(self, topic: str, event: dict[str, Any]) -> None:
        """An event of the run (on the event loop; from another thread, handed to it)."""
        try:
            here = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        if here is not self._loop and self._loop is not None:
            self._loop.call_soon_threadsafe(self._heard, topic, event)
            return
        self._events.append(event)
        if len(self._events) >= BUFFER:
            self._room.clear()  # type: ignore[union-attr]
        self._more.set()  # type: ignore[union-attr]

    async def _wait_room(self) -> None:
        """The run's flow control: wait while the reader is :data:`BUFFER` events behind."""
        room = self._room
        while room is not None and not room.is_set() and not self._signal.cancelled:
            await room.wait()

    def _settle(self, task: asyncio.Future[Any]) -> None:
        """Take the run's outcome: result or error, and its status."""
        if self.status is not None:
            return
        if task.cancelled():
            self.error = Cancelled(self._signal.reason or "cancelled")
        elif task.exception() is not None:
            self.error = task.exception()
        else:
            self.result = task.result()
        status = self._served.get("status")
        if status in (None, "running"):
            failed = self.error
            status = (
                "done" if failed is None
                else "waiting-approval" if isinstance(failed, ApprovalPending)
                else "cancelled" if isinstance(failed, (Cancelled, asyncio.CancelledError))
                else "error"
            )  # fmt: skip
        self.status = status
