"""Blocking waits routed through the host.

The guest may wait only in the host's ``poll`` import, which honours the time
limit and interrupts and lets the host's event loop run meanwhile. WASI's own
waits (``poll_oneoff``: ``time.sleep``, ``select``, even with a zero timeout)
would block the host's thread, so the host traps them (see the host's
``_engine``): here ``time.sleep``, ``select.select`` and ``select.poll`` become
waits in ``poll`` instead, and readiness is answered without WASI. The sandbox
has no files, pipes or network, so the only descriptors are the standard
streams: stdin is always readable (at its end), stdout and stderr always
writable, and nothing else is ever ready.
"""

import select
import selectors
import time

from . import _clock

_WRITABLE = (1, 2)


def _fileno(obj):
    return obj if isinstance(obj, int) else obj.fileno()


def _ready(rlist, wlist, xlist):
    """What ``select`` would report as ready right now (see the module docstring)."""
    return (
        [f for f in rlist if _fileno(f) == 0],
        [f for f in wlist if _fileno(f) in _WRITABLE],
        [],
    )


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
        ready = _ready(list(rlist), list(wlist), list(xlist))
        if not any(ready):  # nothing can become ready: wait out the timeout
            get_loop().block(timeout)
        return ready

    class Poll:
        """``select.poll`` whose ``poll(timeout)`` waits in the host."""

        def __init__(self):
            self._fds = {}

        def register(self, fd, eventmask=select.POLLIN | select.POLLPRI | select.POLLOUT):
            self._fds[_fileno(fd)] = eventmask

        def modify(self, fd, eventmask):
            if _fileno(fd) not in self._fds:
                raise FileNotFoundError(2, "No such file or directory")
            self._fds[_fileno(fd)] = eventmask

        def unregister(self, fd):
            del self._fds[_fileno(fd)]

        def poll(self, timeout=None):
            ready = []
            for fd, mask in self._fds.items():
                events = (mask & select.POLLIN if fd == 0 else 0) | (mask & select.POLLOUT if fd in _WRITABLE else 0)
                if events:
                    ready.append((fd, events))
            if not ready:
                get_loop().block(None if timeout is None or timeout < 0 else timeout / 1000)
            return ready

    time.sleep = sleep
    select.select = select_
    select.poll = Poll  # type: ignore[misc, assignment]
    if hasattr(selectors, "PollSelector"):
        selectors.PollSelector._selector_cls = Poll  # type: ignore[attr-defined]
