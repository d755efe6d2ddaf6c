"""A graceful stop: the run finishes the host call in flight, starts no further turn,
and ends with status ``stopped`` and the model's last text (docs/agent.md, "Stopping a
run"). ``cm.cancel`` stays the hard stop.

A stop reaches an agent run three ways, and each lands in :meth:`StopControl.request`:

* ``cm.stop(run_id)`` in the process that runs it: the run tree's
  :meth:`~agent_apps.run_record.RunTree.request_stop`, which every agent of the run
  hears (a sub-agent stops too, and hands its partial result to its parent's code);
* ``agent-apps runs stop RUN`` (or ``cm.stop``) in another process, on any machine that
  opens the same state store: the request is a row of the store (``store.runs``), which
  :func:`watch_requests` polls every :data:`STOP_POLL` seconds for the runs this
  process runs (one query for all of them, and none when no run is live);
* a model-level middleware that raises :class:`~agent_apps.errors.MiddlewareTermination`:
  this agent alone.

What each part does once the run is stopping: the turn policy denies new tool calls,
answers a model call that has not started with an empty answer and ends the turn with
``stop`` (turns.py); the executor refuses new code; the gateway refuses new host calls
(agent code gets :class:`~agent_apps.errors.RunStopped`) and stops waiting for an
approver.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from ..manager import ContextManager
    from ..run_record import RunTree
    from .run import AgentRun

__all__ = ["STOP_POLL", "StopControl", "watch_requests"]

#: Seconds between two looks at the state store for stop requests made in another
#: process: how late such a stop begins, at most (a stop in this process is immediate).
STOP_POLL = 0.5

_log = logging.getLogger("agent_apps.agent")


class StopControl:
    """Whether one agent run is stopping, and why; what waits for it to be asked."""

    def __init__(self, run: AgentRun) -> None:
        self.run = run
        self._asked: asyncio.Future[str] | None = None
        self._forget: list[Callable[[], None]] = []

    @property
    def reason(self) -> str | None:
        """Why this run stops (None: it does not): its own stop, or its run tree's."""
        return self.run.state.stop_reason or self.run.record.tree.stop_reason

    def open(self) -> None:
        """Listen for a stop of the run tree (from any thread), and for the store's
        requests when this agent is an outermost one."""
        run = self.run
        loop = asyncio.get_running_loop()
        self._asked = loop.create_future()
        tree = run.record.tree

        def heard(reason: str) -> None:  # on whichever thread cm.stop ran
            loop.call_soon_threadsafe(self.request, reason)

        self._forget.append(tree.on_stop(heard))
        if run.record.parent is None:
            self._forget.append(watch_requests(run.cm, run.record.run_id, tree))
        if tree.stop_reason is not None:  # asked before this agent started
            self.request(tree.stop_reason)

    def close(self) -> None:
        for forget in self._forget:
            forget()
        self._forget.clear()

    def request(self, reason: str) -> None:
        """Stop this run gracefully, for ``reason`` (the first reason given stays)."""
        state = self.run.state
        if state.stop_reason is None:
            state.stop_reason = reason
            self.run.reporter.trace("stop", {"reason": reason})
        if self._asked is not None and not self._asked.done():
            self._asked.set_result(reason)

    async def unless_stopped(self, awaitable: Awaitable[Any]) -> tuple[bool, Any]:
        """Await ``awaitable`` until it is done or the run is asked to stop, whichever
        comes first: ``(True, its result)``, or ``(False, None)`` (it is cancelled)."""
        task = asyncio.ensure_future(awaitable)
        try:
            if self.reason is None and self._asked is not None:
                await asyncio.wait({task, self._asked}, return_when=asyncio.FIRST_COMPLETED)
            if self.reason is None or task.done():
                return True, await task
            return False, None
        finally:
            if not task.done():
                task.cancel()


class _Requests:
    """The runs of one ContextManager in this process whose stop requests in the store
    are polled, and the task that polls them. It holds the manager weakly (it is the
    value of a weak map keyed by the manager, which its store points back to)."""

    def __init__(self, cm: ContextManager) -> None:
        self.manager = weakref.ref(cm)
        self.trees: dict[str, list[RunTree]] = {}
        self.task: asyncio.Task[None] | None = None

    def watch(self, run_id: str, tree: RunTree) -> Callable[[], None]:
        self.trees.setdefault(run_id, []).append(tree)
        task = self.task
        if task is None or task.done() or task.get_loop() is not asyncio.get_running_loop():
            self.task = asyncio.get_running_loop().create_task(self._poll())

        def forget() -> None:
            trees = self.trees.get(run_id)
            if trees is not None and tree in trees:
                trees.remove(tree)
                if not trees:
                    del self.trees[run_id]
            if not self.trees and self.task is not None:
                # stop polling now: a poll task left asleep is cancelled when its loop
                # closes, and its traceback then holds this object in a reference cycle
                self.task.cancel()
                self.task = None

        return forget

    async def _poll(self) -> None:
        while self.trees:
            await asyncio.sleep(STOP_POLL)
            ids, cm = list(self.trees), self.manager()
            if not ids or cm is None:
                return
            store, cm = cm.state, None
            try:
                asked = await store.call(store.runs.stop_requests, ids)
            except Exception:  # the store is busy or gone for a moment: look again later
                _log.debug("reading stop requests failed", exc_info=True)
                continue
            for run_id, reason in asked.items():
                for tree in self.trees.get(run_id, ()):
                    tree.request_stop(reason)


_REQUESTS: weakref.WeakKeyDictionary[ContextManager, _Requests] = weakref.WeakKeyDictionary()


def watch_requests(cm: ContextManager, run_id: str, tree: RunTree) -> Callable[[], None]:
    """Poll the store for a stop request of ``run_id`` (made in another process) while
    it runs here, and stop ``tree`` when there is one; returns the end of the watch."""
    requests = _REQUESTS.get(cm)
    if requests is None:
        requests = _REQUESTS[cm] = _Requests(cm)
    return requests.watch(run_id, tree)
