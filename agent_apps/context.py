"""What a skill sees: its :class:`Context`, the ``ctx.manager`` API, the :class:`Signal`.

One Context per invocation. Its scopes:

* ``ctx.args``: the validated args;
* ``ctx.locals``: this invocation and its middleware (the same dict for both);
* ``ctx.nonlocals``: visible to this invocation and its descendants (a ChainMap whose
  front map is this invocation's; writes stay at this level, reads see ancestors);
* ``ctx.internals``: per-invocation flags that never propagate (``untrusted``);
* ``ctx.signal``: cooperative cancellation; a child signal per invocation, cancelled
  with its parent;
* ``ctx.run``: the :class:`~agent_apps.run_record.RunRecord` (run id, session, place in
  the tree of agents), created on first use and inherited;
* ``ctx.parent``, ``ctx.skill``, ``ctx.target`` (the served invocation, for
  middleware and executors).

Two steps of seed 001's ``RunContext``: ``await ctx.llm(...)``, one model call (the
bundled ``llm`` skill), and ``await ctx.sleep_until(when)``, a cancellable sleep to a
point in time (docs/skills.md). In a durable agent run, the journal keeps the outcome
of each call agent code makes, these included and whatever a skill it calls does.
"""

from __future__ import annotations

import asyncio
import datetime
import itertools
import math
import threading
import time
from collections import ChainMap
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from . import tracing
from .errors import AgentAppsError, Cancelled

if TYPE_CHECKING:
    from .events import EventBus, Subscriber
    from .manager import ContextManager
    from .run_record import RunRecord
    from .skill import Skill

__all__ = ["Context", "Finish", "Manager", "Signal", "agent_scope", "epoch_seconds"]

_ids = itertools.count(1)
T = TypeVar("T")


class Finish(BaseException):
    """Raised by ``ctx.manager.finish(value)``; the pipeline turns it into the result.

    A BaseException so that a skill's ``except Exception`` does not swallow it.
    """

    def __init__(self, value: Any) -> None:
        super().__init__("finish")
        self.value = value


class Signal:
    """Cooperative cancellation, safe to use from any thread.

    ``cancel()`` runs the registered callbacks (for threads and sandboxes to stop
    promptly) and cancels every child signal. Skills check :attr:`cancelled` or call
    :meth:`raise_if_cancelled`; long waits can ``await signal.wait()``.
    """

    __slots__ = ("_callbacks", "_children", "_lock", "_parent", "error", "reason")

    def __init__(self, parent: Signal | None = None) -> None:
        self.reason: str | None = None
        #: The error a cancel stands for, when it is not a plain cancel (a budget's
        #: deadline): :meth:`guard` raises it instead of :class:`Cancelled`.
        self.error: AgentAppsError | None = None
        self._callbacks: list[Callable[[str], None]] = []
        self._children: set[Signal] = set()
        self._lock = threading.Lock()
        self._parent = parent
        if parent is not None:
            with parent._lock:
                parent._children.add(self)
                self.reason, self.error = parent.reason, parent.error

    @property
    def cancelled(self) -> bool:
        return self.reason is not None

    def child(self) -> Signal:
        """A signal cancelled whenever this one is (but not the other way round)."""
        return Signal(self)

    def cancel(self, reason: str = "cancelled", *, error: AgentAppsError | None = None) -> None:
        with self._lock:
            if self.reason is not None:
                return
            self.reason = reason
            self.error = error
            callbacks, self._callbacks = self._callbacks, []
            children, self._children = list(self._children), set()
        # Children first: the innermost work hears of the cancellation before the
        # outer task is cancelled and unwinds (and detaches) the inner signals.
        for child in children:
            child.cancel(reason, error=error)
        for callback in callbacks:
            try:
                callback(reason)
            except Exception:  # a broken listener must not stop the others
                import logging

                logging.getLogger("agent_apps").warning("signal callback failed", exc_info=True)

    def add_callback(self, callback: Callable[[str], None]) -> Callable[[], None]:
        """Call ``callback(reason)`` on cancellation (now, if already cancelled)."""
        with self._lock:
            if self.reason is None:
                self._callbacks.append(callback)
                return lambda: self._remove(callback)
        callback(self.reason)
        return lambda: None

    def raise_if_cancelled(self) -> None:
        if self.reason is not None:
            raise Cancelled(self.reason)

    async def guard(self, awaitable: Awaitable[T]) -> T:
        """Await ``awaitable`` in the current task, and cancel that wait when this signal
        is cancelled (it raises :class:`Cancelled` with the reason then, or the cancel's
        ``error``), so a cancel stops whatever the awaitable is doing even when it never
        looks at the signal. Cancelling the awaiting task from outside cancels this
        signal too."""
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        state = {"running": True, "requested": False}

        def cancel_task(reason: str) -> None:
            def cancel() -> None:
                if state["running"] and task is not None:
                    state["requested"] = True
                    task.cancel()

            loop.call_soon_threadsafe(cancel)

        remove = self.add_callback(cancel_task)
        try:
            return await awaitable
        except asyncio.CancelledError:
            if state["requested"] and task is not None and task.uncancel() == 0:
                raise (self.error or Cancelled(self.reason or "cancelled")) from None
            self.cancel("cancelled")
            raise
        finally:
            state["running"] = False
            remove()

    async def wait(self) -> str:
        """Wait until cancelled; returns the reason."""
        if self.reason is not None:
            return self.reason
        loop = asyncio.get_running_loop()
        future: asyncio.Future[str] = loop.create_future()

        def settle(reason: str) -> None:
            if not future.done():
                future.set_result(reason)

        def wake(reason: str) -> None:
            loop.call_soon_threadsafe(settle, reason)

        remove = self.add_callback(wake)
        try:
            return await future
        finally:
            remove()

    def detach(self) -> None:
        """Forget the parent link (when the invocation ends), so trees do not leak."""
        parent = self._parent
        if parent is not None:
            with parent._lock:
                parent._children.discard(self)
            self._parent = None

    def _remove(self, callback: Callable[[str], None]) -> None:
        with self._lock:
            if callback in self._callbacks:
                self._callbacks.remove(callback)


class Context:
    """One invocation: its skill, args, scopes, signal and place in the tree."""

    __slots__ = (
        "_cm",
        "_configured",
        "_manager",
        "_nonlocals",
        "_signal",
        "args",
        "callbacks",
        "depth",
        "id",
        "internals",
        "locals",
        "parent",
        "skill",
        "span",
        "target",
        "_next",
        "_owns_signal",
        "_run",
    )

    def __init__(
        self,
        cm: ContextManager,
        skill: Skill,
        args: dict[str, Any],
        parent: Context | None,
        *,
        signal: Signal | None = None,
        target: Context | None = None,
        internals: dict[str, Any] | None = None,
        locals: dict[str, Any] | None = None,
    ) -> None:
        self._cm = cm
        self.skill = skill
        self.args = args
        self.parent = parent
        self.depth: int = 0 if parent is None else parent.depth + 1
        self.id = f"{cm.id}-{next(_ids)}"
        self.locals: dict[str, Any] = {} if locals is None else locals
        self.internals: dict[str, Any] = {} if internals is None else internals
        self.target = target
        self.callbacks: list[str] | None = None
        self._signal = signal
        self._owns_signal = False
        self._nonlocals: ChainMap[str, Any] | None = None
        self._manager: Manager | None = None
        self._next: Callable[[dict[str, Any] | None], Awaitable[Any]] | None = None
        self._run: RunRecord | None = None
        self._configured: bool | None = None
        #: The invocation's OpenTelemetry span, when tracing is on (agent_apps.tracing).
        self.span: tracing.Span | None = None

    @property
    def manager(self) -> Manager:
        """The skill's API into the ContextManager (invoke, finish, next, ...)."""
        if self._manager is None:
            self._manager = Manager(self._cm, self)
        return self._manager

    @property
    def configured(self) -> bool:
        """Whether this invocation or one above it was given ``config=`` (a call layer,
        :func:`agent_apps.config.call_config`). Cached on each invocation, so asking
        costs one step up the tree, not a walk to its top: every call from agent code
        asks. The pipeline sets an invocation's layer before anything runs under it."""
        configured = self._configured
        if configured is None:
            parent = self.parent
            configured = bool(self.internals.get("config")) or (parent is not None and parent.configured)
            self._configured = configured
        return configured

    @property
    def signal(self) -> Signal:
        if self._signal is None:
            parent = self.parent.signal if self.parent is not None else None
            self._signal = Signal(parent)
            self._owns_signal = True
        return self._signal

    @property
    def nonlocals(self) -> ChainMap[str, Any]:
        if self._nonlocals is None:
            self._nonlocals = self.parent.nonlocals.new_child() if self.parent is not None else ChainMap({})
        return self._nonlocals

    @property
    def run(self) -> RunRecord:
        """Where this invocation sits in its run tree: the parent's record, or a new
        run's at the top (made on first use, so plain invocations mint no id)."""
        record = self._run
        if record is None:
            if self.parent is not None:
                record = self._run = self.parent.run
            else:
                from .run_record import RunRecord  # here: a plain invocation never needs one

                trace_id, tenant = tracing.trace_id(self), self.internals.get("tenant")
                record = self._run = RunRecord.new(signal=self.signal, trace_id=trace_id, tenant_id=tenant)
                self._cm._runs[record.run_id] = record  # cm.cancel(run_id) finds it
        return record

    def continue_run(self, record: RunRecord) -> None:
        """Make this invocation part of the run ``record`` names (a scheduled run, a
        resumed one): its id and tenant (this invocation's ``tenant=`` when the record has
        none), with this invocation's cancellation token and trace, so
        ``cm.cancel(run_id)`` finds it."""
        trace_id = record.trace_id or tracing.trace_id(self) or record.run_id
        tenant = record.tenant_id or self.internals.get("tenant")
        self._run = replace(record, signal=record.signal or self.signal, trace_id=trace_id, tenant_id=tenant)
        if self.parent is None:
            self._cm._runs[record.run_id] = self._run

    @property
    def events(self) -> EventBus:
        return self._cm.events

    @property
    def chain(self) -> list[str]:
        """Skill names from the outermost invocation down to this one."""
        names = []
        node: Context | None = self
        while node is not None:
            names.append(node.skill.name)
            node = node.parent
        return names[::-1]

    def __repr__(self) -> str:
        return f"<Context {self.id} {' -> '.join(self.chain)}>"

    async def llm(
        self,
        prompt: str | None = None,
        *,
        messages: list[dict[str, str]] | None = None,
        system: str | None = None,
        schema: dict[str, Any] | bool | None = None,
        config: dict[str, Any] | None = None,
    ) -> Any:
        """Ask the model once, with no tools; returns its text, or with ``schema`` the
        JSON value that matches it.

        It invokes the bundled ``llm`` skill as a child of this invocation, so this
        skill's allowed-tools must allow ``llm``. The model is this skill's ``model``
        config with ``config`` on top, and the call counts in the run's budget.

        Args:
            prompt: the user's message.
            messages: earlier turns, ``{"role": "user" | "assistant", "text": ...}``,
                oldest first (the last is the user's when there is no ``prompt``).
            system: the system prompt.
            schema: a JSON Schema; the answer is parsed as JSON and validated.
            config: model keys for this call only (``model_id``, ``temperature``...).

        Example: ``title = await ctx.llm(f"A title for: {text}", system="Be brief.")``
        """
        given = {"prompt": prompt, "messages": messages, "system": system, "schema": schema, "config": config}
        return await self.manager.invoke("llm", {k: v for k, v in given.items() if v is not None})

    async def sleep_until(self, when: datetime.datetime | float | int | str) -> float:
        """Sleep until ``when`` (a datetime, seconds since the epoch, or an ISO 8601
        text; naive times are local), or not at all when it has passed; returns the
        seconds slept. A cancel of this invocation ends the sleep with
        :class:`~agent_apps.errors.Cancelled`. Agent code sleeps with the
        ``sleep-until`` skill, which a resumed durable run does not sleep again."""
        delay = max(0.0, epoch_seconds(when) - time.time())
        if delay:
            await self.signal.guard(asyncio.sleep(delay))
        return delay

    def _close(self) -> None:
        """End of the invocation: release its callback refs, unlink its signal, and drop
        ``ctx.manager`` (it points back here: a cycle would keep every finished
        invocation that used it alive until the garbage collector runs)."""
        self._manager = None
        if self.callbacks:
            for ref in self.callbacks:
                self._cm.release(ref)
            self.callbacks = None
        if self._owns_signal:
            self._signal.detach()  # type: ignore[union-attr]
        if self.parent is None and self._run is not None:
            self._cm._runs.pop(self._run.run_id, None)


def epoch_seconds(when: datetime.datetime | float | int | str) -> float:
    """``when`` as seconds since the epoch: a datetime, a number, or an ISO 8601 text
    (naive times are local, as :meth:`datetime.datetime.timestamp` takes them)."""
    if isinstance(when, datetime.datetime):
        return when.timestamp()
    if isinstance(when, (int, float)) and not isinstance(when, bool):
        if not math.isfinite(when):
            raise ValueError(f"{when!r} is not a point in time")
        return float(when)
    if isinstance(when, str):
        try:
            return datetime.datetime.fromisoformat(when).timestamp()
        except ValueError:
            raise ValueError(f"{when!r} is not an ISO 8601 time (such as 2026-11-27T08:00:00+00:00)") from None
    raise TypeError(f"a time is a datetime, seconds since the epoch or an ISO 8601 text, not {type(when).__name__}")


def agent_scope(ctx: Context) -> dict[str, Any] | None:
    """The scope (the ``agent`` nonlocal) of the agent whose code made the call ``ctx``;
    None for any other caller. Tools read in it what that agent's code may reach (its
    skill's folder, the guidance it loaded, its workspace)."""
    caller = ctx.parent
    if caller is None or not caller.internals.get("untrusted"):
        return None
    scope = caller.nonlocals.get("agent")
    return scope if isinstance(scope, dict) else None


class Manager:
    """``ctx.manager``: what a running skill can ask of the ContextManager."""

    __slots__ = ("_cm", "_ctx")

    def __init__(self, cm: ContextManager, ctx: Context) -> None:
        self._cm = cm
        self._ctx = ctx

    @property
    def context_manager(self) -> ContextManager:
        return self._cm

    async def invoke(self, ref: Any, args: dict[str, Any] | None = None, **options: Any) -> Any:
        """Invoke a skill as a child of this invocation (its allowed-tools apply)."""
        return await self._cm._invoke(ref, args, self._ctx, options)

    def invoke_sync(self, ref: Any, args: dict[str, Any] | None = None, **options: Any) -> Any:
        """From a plain ``def`` skill (which runs in a worker thread): invoke and wait."""
        loop = self._cm._loop_for_threads
        if loop is None:
            raise RuntimeError("invoke_sync from a skill needs the skill to run in a worker thread")
        future = asyncio.run_coroutine_threadsafe(self._cm._invoke(ref, args, self._ctx, options), loop)
        return future.result()

    def finish(self, value: Any = None) -> None:
        """End this invocation now, with ``value`` as its result."""
        raise Finish(value)

    async def next(self, args: dict[str, Any] | None = None) -> Any:
        """(Middleware) run the rest of the onion and the skill; returns its result.

        ``args`` replaces the served invocation's args (validated again).
        """
        if self._ctx._next is None:
            raise AgentAppsError(
                f"{self._ctx.skill.name}: ctx.manager.next() is only available in middleware",
                skill=self._ctx.skill.name,
            )
        return await self._ctx._next(args)

    def callback(
        self,
        fn: Callable[..., Any],
        *,
        name: str = "callback",
        params: dict[str, Any] | None = None,
        description: str = "",
    ) -> str:
        """Register ``fn(ctx, args)`` as a skill; returns its ref, released when this
        invocation ends."""
        return self._cm.callback(fn, owner=self._ctx, name=name, params=params, description=description)

    def metric(self, name: str, value: float | str | bool) -> None:
        """Record a metric of this invocation (a count, a size, a flag): for a call from
        agent code it shows in the run's report and reaches the tool-call hooks
        (docs/agent.md, "Hooks"). Setting a name again replaces its value."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"a metric's name is a non-empty string, not {name!r}")
        if not isinstance(value, (int, float, str, bool)):
            raise TypeError(f"metric {name!r}: a value is a number, a string or a bool, not {type(value).__name__}")
        self._ctx.internals.setdefault("metrics", {})[name] = value

    def emit(self, topic: str, event: dict[str, Any]) -> None:
        self._cm.events.emit(topic, event)

    def subscribe(self, topic: str, handler: Subscriber) -> Callable[[], None]:
        return self._cm.events.subscribe(topic, handler)

    def config(self, call: dict[str, Any] | None = None) -> dict[str, Any]:
        """The cascaded config for this skill: defaults < user < project < dirs < metadata
        < the call layer (the ``config=`` of this invocation and of those above it, as
        docs/config.md says) < ``call``."""
        from .config import call_config

        return self._cm.config_for(self._ctx.skill, call_config(self._ctx, call)).values
