"""The event bus: topics, subscribers (callables or skill refs), fire-and-forget emit.

A failing subscriber is logged and never breaks the emitter. Subscribers may be plain
functions, coroutine functions, or refs of skills (invoked through the pipeline with
the event as args). Topics are matched with ``fnmatch`` globs, so ``agent.*`` hears
every agent topic. ``emit`` is safe to call from any thread.

A subscription may have an id (``event-subscribe`` gives one), by which
:meth:`EventBus.unsubscribe` ends it; ids starting with ``psub-`` are subscriptions
persisted in the state store, which :meth:`EventBus.sync_persisted` keeps in step with it.
A ref subscribed by a skill carries its maker's :class:`~agent_apps.authority.Authority`,
under which every delivery is invoked (docs/security.md, "Deferred work").

A subscriber may also give a *flow control* (``subscribe(..., flow=wait)``), an async
``wait()`` that returns once it has room for more: an agent run that publishes on the
topic awaits it between steps (:meth:`EventBus.flow_controls`), so a reader that is
behind (``cm.stream``) holds the run back instead of piling up events.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import asyncio
    import logging

    from .authority import Authority
    from .manager import ContextManager

__all__ = ["PERSISTED_PREFIX", "EventBus", "Subscriber"]

Subscriber = Callable[[str, dict[str, Any]], Any] | str

#: The id prefix of subscriptions persisted in the state store.
PERSISTED_PREFIX = "psub-"


@dataclass(frozen=True)
class _Subscription:
    pattern: str
    handler: Subscriber
    exact: bool
    id: str | None = None
    authority: Authority | None = None
    flow: Callable[[], Awaitable[None]] | None = None


class EventBus:
    """Publish/subscribe by topic. One per :class:`~agent_apps.ContextManager`."""

    def __init__(self, manager: ContextManager | None = None) -> None:
        self._manager = manager
        self._subs: list[_Subscription] = []
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: set[asyncio.Future[Any]] = set()

    def subscribe(
        self,
        topic: str,
        handler: Subscriber,
        *,
        id: str | None = None,
        authority: Authority | None = None,
        flow: Callable[[], Awaitable[None]] | None = None,
    ) -> Callable[[], None]:
        """Call ``handler(topic, event)`` (or invoke the ref with the event) for each
        event on a topic matching ``topic``. Returns a function that unsubscribes;
        ``id`` names the subscription for :meth:`unsubscribe` (one id, one subscription);
        a ref is invoked under ``authority``, its maker's (None: as a top-level call);
        ``flow`` is the subscriber's flow control (see the module docstring)."""
        sub = _Subscription(topic, handler, not any(c in topic for c in "*?["), id, authority, flow)
        with self._lock:
            self._subs = [*(s for s in self._subs if id is None or s.id != id), sub]

        def unsubscribe() -> None:
            with self._lock:
                self._subs = [s for s in self._subs if s is not sub]

        return unsubscribe

    def unsubscribe(self, id: str) -> bool:
        """End the subscription of that id; False if there is none."""
        with self._lock:
            kept = [s for s in self._subs if s.id != id]
            found, self._subs = len(kept) != len(self._subs), kept
        return found

    def ids(self) -> set[str]:
        """The ids of the subscriptions that have one."""
        return {s.id for s in self._subs if s.id is not None}

    def sync_persisted(self, rows: Iterable[tuple[str, str, str, Authority | None]]) -> None:
        """Make the persisted subscriptions of this bus those of ``rows`` (``(id, topic,
        ref, authority)``, as the state store has them): new ones subscribed, removed
        ones ended."""
        wanted = {ident: (topic, ref, authority) for ident, topic, ref, authority in rows}
        for ident in self.ids():
            if ident.startswith(PERSISTED_PREFIX) and ident not in wanted:
                self.unsubscribe(ident)
        have = self.ids()
        for ident, (topic, ref, authority) in wanted.items():
            if ident not in have:
                self.subscribe(topic, ref, id=ident, authority=authority)

    def has_subscribers(self, topic: str) -> bool:
        return any(self._matches(s, topic) for s in self._subs)

    @property
    def listened(self) -> bool:
        """Whether anything subscribes to any topic (else an event goes nowhere)."""
        return bool(self._subs)

    def flow_controls(self, topic: str) -> list[Callable[[], Awaitable[None]]]:
        """The flow controls of the subscribers of ``topic`` (see the module docstring)."""
        return [s.flow for s in self._subs if s.flow is not None and self._matches(s, topic)]

    def emit(self, topic: str, event: dict[str, Any]) -> None:
        """Deliver ``event`` to every subscriber of ``topic``; never raises.

        Synchronous handlers run now; coroutine handlers and skill refs are scheduled
        on the running event loop (or the one the bus last saw, when called from
        another thread). :meth:`drain` waits for the scheduled ones.
        """
        for sub in self._subs:
            if not self._matches(sub, topic):
                continue
            handler = sub.handler
            try:
                if isinstance(handler, str):
                    if self._manager is None:
                        raise RuntimeError("a ref subscriber needs a ContextManager")
                    from .authority import invoke_as  # here: a bus that delivers no ref never needs it

                    args = {"topic": topic, "event": event}
                    self._schedule(invoke_as(self._manager, sub.authority, handler, args), sub)
                    continue
                result = handler(topic, event)
                if inspect.isawaitable(result):
                    self._schedule(result, sub)
            except Exception:
                _log().warning("event subscriber %r for topic %r failed", handler, topic, exc_info=True)

    async def drain(self) -> None:
        """Wait until every scheduled asynchronous delivery has finished."""
        import asyncio

        while self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)

    # -- internals -------------------------------------------------------------------

    @staticmethod
    def _matches(sub: _Subscription, topic: str) -> bool:
        return sub.pattern == topic if sub.exact else fnmatchcase(topic, sub.pattern)

    def _schedule(self, awaitable: Awaitable[Any], sub: _Subscription) -> None:
        import asyncio

        async def deliver() -> None:
            try:
                await awaitable
            except Exception:
                _log().warning("event subscriber %r for topic %r failed", sub.handler, sub.pattern, exc_info=True)

        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is not None:
            self._loop = loop
            self._track(loop.create_task(deliver()))
        elif self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(lambda: self._track(asyncio.ensure_future(deliver())))
        else:
            if inspect.iscoroutine(awaitable):
                awaitable.close()
            _log().warning("event for %r dropped: no event loop to deliver it on", sub.pattern)

    def _track(self, future: asyncio.Future[Any]) -> None:
        self._pending.add(future)
        future.add_done_callback(self._pending.discard)


def _log() -> logging.Logger:
    """The module's logger; logging is imported when something goes wrong, not at start."""
    import logging

    return logging.getLogger("agent_apps.events")
