"""The guest's host calls: each one judged, started at once in a task of its own, its
outcome queued.

When the guest waits in the ``poll`` import it submits the calls it issued since its
last wait (JSON ``{"calls": [[id, name, args, options?], ...], "cancel": [id, ...]}``).
:meth:`GuestCalls.submit` judges every entry again host-side (agent code can change the
guest runtime), answers a refused call at once with an error, and starts the others as
tasks on the event loop, in a copy of the context of the code that started the run. A
finished call leaves its outcome, JSON ``[id, ok, result or error]``, in
:attr:`GuestCalls.done`, and wakes the driver (``_core.Core``), which hands the
outcomes to the guest at its next wait.

A call's first step runs at once, inside ``submit`` (Python 3.11 has no eager tasks):
its task is made first and is the current task during that step, so whatever captures
"the current task" (``asyncio.timeout``, ``Signal.guard``, the gateway's calls in
flight) captures the call's own task, as if the task ran the step. A call that ends in
that step (a quick skill) is answered in the same wait, with no round of the event
loop; one that suspends goes on in its task, which is handed what the step awaited.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import json
import types
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import TYPE_CHECKING, Any

from .._json import MAX_DEPTH, encoder
from .._json import loads as _loads
from ._refs import options_refusal, ref_refusal

if TYPE_CHECKING:
    from ._core import Core

__all__ = ["CallHost", "GuestCalls"]

#: ``call_host(name, args)``, or ``call_host(name, args, **options)`` for a call that
#: carries options (``middleware=[...]``, ``next=True``; see ``_refs.options_refusal``).
CallHost = Callable[..., Awaitable[Any]]

MAX_ERROR_MESSAGE = 8 * 1024
#: One poll may carry at most this many times ``max_payload_kb`` of JSON (several
#: gathered calls, each within the payload limit); more is refused before parsing.
MAX_BATCH_PAYLOADS = 16
#: One encoder for every call result (``json.dumps`` with options builds one per call).
_encode = encoder(allow_nan=False)
_Coroutine = types.CoroutineType
#: asyncio's own record of the running task, which a task's step sets and clears.
_enter_task, _leave_task = asyncio.tasks._enter_task, asyncio.tasks._leave_task
#: What ``asyncio.current_task(loop)`` reads, without its Python frame (once per host call).
_current_tasks: dict[Any, Any] = asyncio.tasks._current_tasks  # type: ignore[attr-defined]


class GuestCalls:
    """The host calls of one sandbox's guest (see the module docstring)."""

    def __init__(self, core: Core) -> None:
        self.core = core
        #: Performs one call for the guest (None: the guest's calls fail).
        self.call_host: CallHost | None = None
        #: Who the calls come from, in refusals ("agent code").
        self.caller_name = "agent code"
        #: The context of the code that started the run: calls run in a copy of it, so
        #: context variables (an approval session, a security mode) reach them.
        self.context: contextvars.Context | None = None
        #: Outcomes the guest has not been given yet (JSON entries).
        self.done: list[str] = []
        #: The calls of the guest's last wait were started and have not yielded yet.
        self.fresh = False
        #: A call's first step raised KeyboardInterrupt or SystemExit: the guest is not
        #: answered until the call's task has raised it out of the event loop (the
        #: driver's next round), as when the task took that step.
        self.hold = False
        #: Calls made this run.
        self.count = 0
        self._ids: set[int] = set()  # every call id the guest used this run
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._ours_cancelled: set[int] = set()
        self._run = 0  # which run a call belongs to: its outcome is dropped after that run

    def begin(self) -> None:
        """A run starts: no call made, none waiting."""
        self.done = []
        self.count = 0
        self._ids = set()
        self.fresh = self.hold = False

    def end(self) -> None:
        """A run ended: the outcomes of its calls still running go nowhere."""
        self._run += 1

    def submit(self, request: str) -> str | None:
        """Judge and start the calls of one wait, and cancel those it names; returns the
        error for the whole wait when the request cannot be answered call by call."""
        lim = self.core.limits
        max_payload = lim.max_payload_kb * 1024
        try:
            if len(request) > MAX_BATCH_PAYLOADS * max_payload:
                raise ValueError(
                    f"{len(request) // 1024} KB in one wait, more than {MAX_BATCH_PAYLOADS} x max_payload_kb"
                )
            req = _loads(request, max_depth=MAX_DEPTH + 3)  # {calls: [[id, name, args]]}: args get MAX_DEPTH
            calls = req["calls"]
            cancels = req.get("cancel") or []
            if not isinstance(calls, list) or not isinstance(cancels, list):
                raise ValueError("calls and cancel must be lists")
            if len(calls) > lim.max_calls:
                raise ValueError(f"{len(calls)} calls in one wait, more than max_calls ({lim.max_calls})")
        except (ValueError, KeyError, TypeError) as e:
            return f"SandboxError: malformed request from the sandbox runtime ({e})"
        big = len(request) > max_payload
        starts: list[tuple[int, str, Any, Any]] = []
        for item in calls:
            try:
                starts.append(self._judge(item, big))
            except _CallRefused as refused:
                self.done.append(_err_entry(refused.call_id, refused.type_name, refused.message))
            except _Malformed as e:
                return f"SandboxError: malformed call in a request from the sandbox runtime ({e})"
        cancel_ids = [c for c in cancels if isinstance(c, int)] if cancels else cancels
        if starts or cancel_ids:
            self._start(starts, cancel_ids)
        return None

    def _judge(self, item: Any, big: bool) -> tuple[int, str, Any, Any]:
        """The one place that judges a call entry from the guest: ``[id, name, args]``
        or ``[id, name, args, options]``.

        Returns the call to start; raises :class:`_CallRefused` for a call the guest
        gets an error for, :class:`_Malformed` when the entry cannot be answered at
        all (no usable id). Every rule the guest runtime applies is applied again
        here, because agent code can change the runtime.
        """
        if (
            not isinstance(item, list) or len(item) not in (3, 4) or not isinstance(item[0], int)
            or isinstance(item[0], bool)
        ):
            raise _Malformed("a call must be [id, name, args] or [id, name, args, options] with an integer id")
        call_id, name, args = item[:3]
        options = item[3] if len(item) == 4 else None
        if call_id in self._ids:
            raise _Malformed(f"call id {call_id} was already used in this run")
        self._ids.add(call_id)
        lim = self.core.limits
        self.count += 1
        if self.count > lim.max_calls:
            raise _CallRefused(
                call_id, "LimitExceeded",
                f"too many ctx.manager.invoke() calls in one run (limit {lim.max_calls}, max_calls)",
            )
        refusal = ref_refusal(name)
        if refusal is not None:
            raise _CallRefused(call_id, "ToolNotAllowed", f"{self.caller_name} may not call {_short(name)}: {refusal}")
        if args is not None and not isinstance(args, dict):
            raise _CallRefused(call_id, "ArgsInvalid", f"args of {name!r} must be a JSON object or null")
        problem = options_refusal(options) if options is not None else None
        if problem is not None:
            raise _CallRefused(call_id, problem[0], f"{self.caller_name} calling {name!r}: {problem[1]}")
        if big:
            size = len(json.dumps(args))
            if size > lim.max_payload_kb * 1024:
                raise _CallRefused(
                    call_id, "LimitExceeded",
                    f"args of {name!r} are too large: {size // 1024} KB > {lim.max_payload_kb} KB (max_payload_kb)",
                )
        return call_id, name, args, options

    def _start(self, starts: list[tuple[int, str, Any, Any]], cancels: list[int]) -> None:
        loop = self.core.loop
        if loop is None:  # a run without an event loop (warming a pooled instance)
            for call_id, *_ in starts:
                self.done.append(_err_entry(call_id, "SandboxError", "this run has no host functions"))
        elif starts:
            self._step(loop, starts)
        for call_id in cancels:
            task = self._tasks.get(call_id)
            if task is not None:
                self._ours_cancelled.add(call_id)
                task.cancel()

    def _step(self, loop: asyncio.AbstractEventLoop, starts: list[tuple[int, str, Any, Any]]) -> None:
        """Make each call's task and take its first step now, as that task (see the
        module docstring); a call still going after it goes on in its task."""
        context, run = self.context, self._run
        current = _current_tasks.get(loop)  # the driver's task, whose step this is
        for call_id, name, args, options in starts:
            stepped = _Stepped(self._one(run, call_id, name, args, options))
            call_context = context.copy() if context is not None else contextvars.copy_context()
            task = loop.create_task(stepped, context=call_context)
            self._tasks[call_id] = task
            if current is not None:
                _leave_task(loop, current)
            _enter_task(loop, task)
            try:
                first = call_context.run(stepped.first_step)
            finally:
                _leave_task(loop, task)
                if current is not None:
                    _enter_task(loop, current)
            if first != _RETURNED:
                self.fresh = True
                self.hold = self.hold or first == _RAISED

    async def _one(self, run: int, call_id: int, name: str, args: Any, options: Any = None) -> None:
        entry: str | None
        try:
            if self.call_host is None:
                raise _NoHost("this sandbox has no host functions (no call_host was given)")
            result = self.call_host(name, args, **options) if options else self.call_host(name, args)
            if type(result) is _Coroutine or inspect.isawaitable(result):  # the gateway's: a coroutine
                result = await result
            try:
                payload = _encode(result)
            except (TypeError, ValueError) as e:
                entry = _err_entry(call_id, "ResultInvalid", f"{name!r} returned a value that is not JSON: {e}")
            else:
                max_payload_kb = self.core.limits.max_payload_kb
                if len(payload) > max_payload_kb * 1024:
                    entry = _err_entry(
                        call_id, "LimitExceeded",
                        f"the result of {name!r} is too large: {len(payload) // 1024} KB "
                        f"> {max_payload_kb} KB (max_payload_kb)",
                    )
                else:
                    entry = f"[{call_id},true,{payload}]"
        except asyncio.CancelledError:
            if call_id in self._ours_cancelled or run != self._run:
                entry = None
            else:
                entry = _err_entry(call_id, "Cancelled", f"the call of {name!r} was cancelled")
        except Exception as e:
            type_name = getattr(e, "type_name", None) or type(e).__name__
            entry = _err_entry(call_id, type_name, str(e))
        except BaseException as e:  # KeyboardInterrupt, SystemExit: tell the guest, then propagate
            if run == self._run:
                self.done.append(_err_entry(call_id, type(e).__name__, str(e) or "host interrupted"))
                self.core.wake_up()
            raise
        finally:
            self._tasks.pop(call_id, None)
            self._ours_cancelled.discard(call_id)
        if entry is not None and run == self._run:
            self.done.append(entry)
            self.core.wake_up()

    def cancel_all(self) -> None:
        """Cancel host calls left over from a finished run (event loop thread)."""
        for call_id, task in list(self._tasks.items()):
            self._ours_cancelled.add(call_id)
            task.cancel()


class _Stepped(Coroutine[Any, Any, None]):
    """A call's coroutine whose first step ran before its task's (see the module
    docstring): the task's first ``send`` gets what that step yielded, or its end."""

    __slots__ = ("_coro", "_first")

    def __init__(self, coro: Coroutine[Any, Any, None]) -> None:
        self._coro = coro
        #: what the first step did: yielded this (a future, or None for a bare yield),
        #: returned (StopIteration), or raised a BaseException for the task to raise
        self._first: tuple[int, Any] | None = None

    def first_step(self) -> int:
        """Run the first step; returns what it did (``_YIELDED``, ``_RETURNED``, ``_RAISED``)."""
        try:
            self._first = (_YIELDED, self._coro.send(None))
        except StopIteration:
            self._first = (_RETURNED, None)
        except BaseException as e:  # KeyboardInterrupt, SystemExit: _one told the guest; the task raises it
            self._first = (_RAISED, e)
        return self._first[0]

    def send(self, value: Any) -> Any:
        first = self._first
        if first is None:
            return self._coro.send(value)
        self._first = None
        kind, what = first
        if kind == _YIELDED:
            return what
        if kind == _RETURNED:
            raise StopIteration
        raise what

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:  # type: ignore[override]
        first = self._first
        if first is not None:  # the task is cancelled before its first step
            self._first = None
            if first[0] == _RAISED:  # a KeyboardInterrupt is not lost to a cancel
                raise first[1]
            if first[0] == _RETURNED:
                raise typ if val is None else val
            if isinstance(first[1], asyncio.Future):  # as a cancel of a task awaiting it would
                first[1].cancel()
        return self._coro.throw(typ) if val is None else self._coro.throw(typ, val, tb)

    def close(self) -> None:
        self._coro.close()

    def __await__(self) -> Generator[Any, None, None]:  # the task only sends and throws
        raise TypeError("a started host call is not awaitable")

    def __getattr__(self, name: str) -> Any:
        """The coroutine's own ``__qualname__``, ``cr_frame``...: a task's repr (and
        asyncio's warnings) name the call's coroutine, as for a task made of it."""
        return getattr(self._coro, name)


_YIELDED, _RETURNED, _RAISED = 0, 1, 2


class _NoHost(Exception):
    type_name = "SandboxError"


class _CallRefused(Exception):
    """A call from the guest that is answered with an error and never started."""

    def __init__(self, call_id: int, type_name: str, message: str) -> None:
        super().__init__(message)
        self.call_id, self.type_name, self.message = call_id, type_name, message


class _Malformed(Exception):
    """A request the host cannot answer call by call: the whole poll fails."""


def _err_entry(call_id: int, type_name: str, message: str) -> str:
    if len(message) > MAX_ERROR_MESSAGE:
        message = message[:MAX_ERROR_MESSAGE] + " [message truncated]"
    return json.dumps([call_id, False, {"type": type_name, "message": message}])


def _short(name: Any) -> str:
    text = repr(name)
    return text if len(text) <= 64 else text[:61] + "..."
