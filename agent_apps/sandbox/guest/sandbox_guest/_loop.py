"""An asyncio event loop whose idle wait is the host's ``poll`` import.

``asyncio.BaseEventLoop`` does all the scheduling (ready queue, timers, tasks);
the only thing a loop needs from the outside world is "wait until something
happens, at most ``timeout`` seconds", which BaseEventLoop asks of
``self._selector.select(timeout)``. Here that wait is one host call that also
carries the calls issued since the last wait, so ``asyncio.gather`` over
several ``ctx.manager.invoke`` submits them in ONE batch and the host runs them
concurrently. No threads are needed inside the guest.
"""

import math
from asyncio import Future, base_events
from json import JSONDecoder
from json import dumps as _dumps  # bound now: agent code patching json must not break us
from json.encoder import encode_basestring_ascii as _quote  # what json.dumps does for a str
from json.scanner import make_scanner
from time import monotonic as _monotonic
from typing import Any

from componentize_py_types import Err
from wit_world.imports import host

from ._api import host_error

NO_TIMER = 4294967295  # u32 max: wait for a completion, no timer
#: Parses the host's answer to a poll (JSON it wrote, no leading whitespace) in one
#: call into the C scanner: ``json.loads`` adds three Python calls.
_decoder: Any = JSONDecoder()  # typeshed types make_scanner's argument as a scanner
_scan = make_scanner(_decoder)


class HostStop(BaseException):
    """The host ended the run (time limit, interrupt, malformed batch)."""


class Deadlock(Exception):
    """Agent code awaits something that can never complete."""


class _HostSelector:
    def __init__(self, loop) -> None:
        self._loop = loop

    def select(self, timeout):
        self._loop._wait(timeout)
        return ()

    def close(self) -> None:
        pass


class HostCall(Future):
    """The future of one host call (what ``ctx.manager.invoke`` returns).

    Awaited when nothing else on the loop could run meanwhile (the common ``await
    ctx.manager.invoke(...)`` in a loop), it waits for the host right there: no round
    of the loop, no callback, no task wake-up. Otherwise (gathered, or other tasks
    ready) it is an ordinary future.
    """

    def __init__(self, loop: "GuestLoop", call_id: int) -> None:
        super().__init__(loop=loop)
        self._call_id = call_id
        self._guest = loop  # get_loop(), typed as the loop it is

    def cancel(self, msg=None) -> bool:
        if not super().cancel(msg):
            return False
        self._guest._forget(self._call_id)
        return True

    def __await__(self):
        loop = self._guest
        if not self.done() and loop._pending.get(self._call_id) is self:  # a call of this run
            loop._wait_inline(self)
        return (yield from super().__await__())


class GuestLoop(base_events.BaseEventLoop):
    # BaseEventLoop's own queues, which the inline wait reads (typeshed leaves them out).
    _ready: Any  # a deque of the handles ready to run
    _scheduled: list[Any]  # a heap of the timer handles, soonest first

    def __init__(self) -> None:
        super().__init__()
        self._selector = _HostSelector(self)
        self._next_id = 0
        self._outbox: list[str] = []
        self._cancels: list[int] = []
        self._pending: dict[int, Any] = {}
        self._stopped: HostStop | None = None  # the host's stop, met in an inline wait

    # BaseEventLoop hooks with no meaning here (no file descriptors, no threads).
    def _process_events(self, event_list) -> None:
        pass

    def _write_to_self(self) -> None:
        pass

    def submit(self, name: str, args_json: str, options_json: str | None = None):
        """Queue a host call, ``[id, name, args]`` or, with call options (a JSON
        object), ``[id, name, args, options]``; returns the future of its result."""
        self._next_id += 1
        call_id = self._next_id
        fut = HostCall(self, call_id)
        options = "" if options_json is None else "," + options_json
        self._outbox.append(f"[{call_id},{_quote(name)},{args_json}{options}]")
        self._pending[call_id] = fut
        return fut

    def _forget(self, call_id: int) -> None:
        """A host call was cancelled: the host hears it at the next poll."""
        if self._pending.pop(call_id, None) is not None:
            self._cancels.append(call_id)

    def _wait_inline(self, fut: HostCall) -> None:
        """Wait for ``fut`` inside the ``await`` while no callback is ready, waking at
        the next timer; the loop's own round takes over as soon as anything else could
        run. A stop from the host is kept for the loop to raise, outside agent code."""
        while not fut.done() and not self._ready and self._stopped is None:
            timeout = None
            if self._scheduled:
                timeout = self._scheduled[0].when() - self.time()
                if timeout <= 0:
                    return
            try:
                self._poll(timeout)
            except HostStop as stop:
                self._stopped = stop

    def pending_calls(self) -> int:
        return len(self._pending)

    def _wait(self, timeout) -> None:
        if self._stopped is not None:
            stop, self._stopped = self._stopped, None
            raise stop
        if not self._outbox and not self._cancels:
            if not self._pending:
                if timeout is None:
                    raise Deadlock(
                        "the code awaits something that can never complete "
                        "(no host call is pending and no timer is set)"
                    )
                if timeout <= 0:
                    return
            elif timeout is not None and timeout <= 0:
                return
        self._poll(timeout)

    def _poll(self, timeout) -> None:
        """One host poll: submit new calls and cancels, wait up to ``timeout``
        seconds (None: until a completion), resolve the completed futures."""
        cancels = _dumps(self._cancels) if self._cancels else "[]"
        batch = '{"calls":[' + ",".join(self._outbox) + '],"cancel":' + cancels + "}"
        self._outbox = []
        self._cancels = []
        if timeout is None:
            ms = NO_TIMER
        else:
            ms = min(NO_TIMER - 1, max(0, math.ceil(timeout * 1000)))
        try:
            reply = host.poll(batch, ms)
        except Err as e:
            raise HostStop(str(e.value)) from None
        for call_id, ok, payload in _scan(reply, 0)[0]:
            fut = self._pending.pop(call_id, None)
            if fut is None or fut.done():
                continue
            if ok:
                fut.set_result(payload)
            else:
                fut.set_exception(host_error(payload))

    def block(self, seconds: float | None) -> None:
        """Block for ``seconds`` (None: until the run is stopped) inside the host
        (``time.sleep`` and friends), so the time limit and interrupts apply;
        calls in flight keep completing."""
        end = None if seconds is None else _monotonic() + seconds
        while True:
            left = None if end is None else end - _monotonic()
            if left is not None and left <= 0:
                return
            self._poll(left)

    def abandon(self) -> None:
        """Forget every pending call (the host cancels them when the run ends)."""
        self._pending.clear()
        self._outbox = []
        self._cancels = []
