"""Time and randomness the host can replay.

A durable agent run hands every code run a clock base and a seed (``setup["clock"]``:
``{"time": wall-clock seconds, "seed": int}``), recorded in its journal. From then on
``random`` is seeded with it, and ``time.time()`` (``time_ns``, ``localtime``,
``gmtime``, ``ctime``, ``strftime`` without a time) and ``datetime.now()`` (``today``,
``utcnow``, ``date.today``) read ``base + what the code slept`` (``time.sleep``): the
code's wall clock starts when the run started and moves only when it sleeps, so it is
the same when the run is replayed (``time.monotonic`` and ``perf_counter`` stay real:
measure durations with them). A resumed run gets the same base and seed again, so code
that reads the clock or draws random numbers takes the same path as the first time.
Without a clock in the setup everything reads the real clock, as before.
"""

import datetime as _dt
import random
import time

_real_time = time.time
_localtime = time.localtime
_gmtime = time.gmtime
_ctime = time.ctime
_strftime = time.strftime
_base = None  # the wall-clock base, when the host gave one
_slept = 0.0  # what the code slept since


def set_clock(clock) -> None:
    """Apply ``setup["clock"]`` (None: back to the real clock)."""
    global _base, _slept
    _slept = 0.0
    if not isinstance(clock, dict):
        _base = None
        return
    _base = float(clock.get("time", _real_time()))
    random.seed(clock.get("seed"))


def slept(seconds: float) -> None:
    """``time.sleep(seconds)`` returned: the code's clock moves on by that much."""
    global _slept
    _slept += seconds


def now() -> float:
    return _real_time() if _base is None else _base + _slept


class _Like(type):
    """``isinstance(x, datetime.date)`` stays true for every real date and datetime."""

    def __instancecheck__(cls, obj):
        return isinstance(obj, cls.__mro__[1])

    def __subclasscheck__(cls, sub):
        return issubclass(sub, cls.__mro__[1])


class _DateTime(_dt.datetime, metaclass=_Like):
    @classmethod
    def now(cls, tz=None):
        return cls.fromtimestamp(now(), tz)

    @classmethod
    def today(cls):
        return cls.fromtimestamp(now())

    @classmethod
    def utcnow(cls):
        return cls.fromtimestamp(now(), _dt.UTC).replace(tzinfo=None)


class _Date(_dt.date, metaclass=_Like):
    @classmethod
    def today(cls):
        return cls.fromtimestamp(now())


_DateTime.__name__ = _DateTime.__qualname__ = "datetime"
_Date.__name__ = _Date.__qualname__ = "date"
_DateTime.__module__ = _Date.__module__ = "datetime"


def install() -> None:
    time.time = now
    time.time_ns = lambda: int(now() * 1_000_000_000)
    time.localtime = lambda secs=None: _localtime(now() if secs is None else secs)
    time.gmtime = lambda secs=None: _gmtime(now() if secs is None else secs)
    time.ctime = lambda secs=None: _ctime(now() if secs is None else secs)
    time.strftime = lambda fmt, t=None: _strftime(fmt, time.localtime() if t is None else t)
    _dt.datetime = _DateTime  # type: ignore[misc]
    _dt.date = _Date  # type: ignore[misc]
