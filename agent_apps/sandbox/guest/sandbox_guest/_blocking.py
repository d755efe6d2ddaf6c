"""Blocking waits routed through the host.

WASI's own waits (``poll_oneoff``: ``time.sleep``, ``select``) block inside
wasmtime's host code, where epoch interruption cannot reach, so a
``time.sleep(10**6)`` would outlive the time limit and ignore interrupts. Here
they become waits in the host's ``poll`` import, which honours both. (The host
also has a watchdog for any wait this misses.)
"""

import select
import selectors
import time

from . import _clock

_select = select.select
_poll = select.poll


def install(get_loop) -> None:
    def sleep(secs):
        """Sleep inside the sandbox host (counts against the run's time limit)."""
        secs = float(secs)
        if secs != secs or secs < 0:
            raise ValueError("sleep length must be non-negative")
        get_loop().block(secs)
        _clock.slept(secs)

    def select_(rlist, wlist, xlist, timeout=None):
        if timeout is not None and timeout < 0:
            raise ValueError("timeout must be non-negative")
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            ready = _select(rlist, wlist, xlist, 0)
            if any(ready):
                return ready
            left = 0.05 if deadline is None else min(0.05, deadline - time.monotonic())
            if left <= 0:
                return ready
            get_loop().block(left)

    class Poll:
        """``select.poll`` whose ``poll(timeout)`` waits in the host."""

        def __init__(self):
            self._p = _poll()

        def register(self, *a):
            return self._p.register(*a)

        def modify(self, *a):
            return self._p.modify(*a)

        def unregister(self, *a):
            return self._p.unregister(*a)

        def poll(self, timeout=None):
            deadline = None if timeout is None or timeout < 0 else time.monotonic() + timeout / 1000
            while True:
                ready = self._p.poll(0)
                if ready:
                    return ready
                left = 0.05 if deadline is None else min(0.05, deadline - time.monotonic())
                if left <= 0:
                    return ready
                get_loop().block(left)

    time.sleep = sleep
    select.select = select_
    select.poll = Poll  # type: ignore[misc, assignment]
    if hasattr(selectors, "PollSelector"):
        selectors.PollSelector._selector_cls = Poll  # type: ignore[attr-defined]
