"""When a schedule is due: every N seconds, a standard 5-field cron expression, or once.

A :class:`When` turns ``schedule-create``'s ``every`` / ``cron`` / ``at`` args into due
times (seconds since the epoch). Bad input is an :class:`~agent_apps.errors.ArgsInvalid`
naming the arg: ``every: 0``, a cron expression with six fields, a time in the past.

* ``every``: due at ``created + k * every`` (k = 1, 2, ...): anchored, so runs never drift.
* ``cron``: the five fields of crontab(5) (minute hour day-of-month month day-of-week) or
  one of ``@hourly @daily @midnight @weekly @monthly @yearly @annually``; evaluated in
  ``tz`` (an IANA name such as ``Europe/Paris``) or the scheduler's local time zone, with
  daylight-saving changes as the zone has them. Parsed by ``croniter`` (the ``scheduler``
  extra), imported only for cron schedules.
* ``at``: one ISO 8601 time (``2026-12-01T09:00``, ``...+01:00``, ``...Z``); without an
  offset it is the creating process's local time. It must be in the future.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from functools import lru_cache
from typing import Any

from .errors import AgentAppsError, ArgsInvalid

__all__ = ["CATCH_UP", "CRON_ALIASES", "LATEST", "MAX_EVERY", "When", "iso"]

#: What happens to due times missed while no scheduler ran (docs/scheduling.md).
CATCH_UP = ("none", "one", "all")
#: The longest ``every``: a hundred years, in seconds.
MAX_EVERY = 100 * 366 * 86400.0
#: No due time is later than this (9999-12-30 UTC): every time zone can still show it.
LATEST = datetime(9999, 12, 30, tzinfo=UTC).timestamp()
CRON_ALIASES = ("@hourly", "@daily", "@midnight", "@weekly", "@monthly", "@yearly", "@annually")
_CRON_FIELDS = "minute hour day-of-month month day-of-week"


@dataclass(frozen=True)
class When:
    """Exactly one of ``every``, ``cron`` (with an optional ``tz``) or ``at``."""

    every: float | None = None
    cron: str | None = None
    tz: str | None = None
    at: float | None = None

    @classmethod
    def parse(cls, args: dict[str, Any], *, now: float, skill: str, least: float = 0.0) -> When:
        """The schedule of ``schedule-create``'s args, checked; ``skill`` names the caller
        in errors, ``least`` is the shortest ``every`` allowed (0: any above 0)."""
        given = [key for key in ("every", "cron", "at") if args.get(key) is not None]
        if len(given) != 1:
            what = ", ".join(given) if given else "none of them"
            raise ArgsInvalid(skill, "", f"give exactly one of every (seconds), cron or at; got {what}")
        if args.get("tz") is not None and given != ["cron"]:
            raise ArgsInvalid(skill, "tz", "tz applies to cron schedules only")
        if given == ["every"]:
            every = args["every"]
            if isinstance(every, bool) or not isinstance(every, (int, float)) or not math.isfinite(every) or every <= 0:
                raise ArgsInvalid(skill, "every", f"must be a number of seconds greater than 0, not {every!r}")
            if every < least:
                raise ArgsInvalid(skill, "every", f"schedules made by agent code run at most once every {least:g} s: "
                                  f"every must be at least {least:g}, not {every!r}")
            if every > MAX_EVERY:
                raise ArgsInvalid(skill, "every", f"must be at most {MAX_EVERY:.0f} seconds (a hundred years), "
                                  f"not {every!r}")
            return cls(every=float(every))
        if given == ["cron"]:
            when = cls(cron=_check_cron(args["cron"], skill), tz=_check_tz(args.get("tz"), skill))
            try:
                when.after(now)
            except AgentAppsError as exc:
                raise ArgsInvalid(skill, "cron", str(exc)) from None
            return when
        at = _parse_at(args["at"], skill)
        if at <= now:
            raise ArgsInvalid(skill, "at", f"{args['at']!r} is in the past (it is now {iso(now)})")
        if at > LATEST:
            raise ArgsInvalid(skill, "at", f"{args['at']!r} is after {iso(LATEST)}, the latest due time there is")
        return cls(at=at)

    def first(self, now: float) -> float | None:
        """The first due time of a schedule created at ``now`` (None: there is none)."""
        if self.at is not None:
            return self.at if self.at <= LATEST else None
        return self.after(now)

    def after(self, t: float) -> float | None:
        """The first due time strictly after due time ``t`` (None: there is none, or it
        would be after :data:`LATEST`)."""
        if self.every is not None:
            due = t + self.every
            return due if due <= LATEST else None
        if self.cron is None:
            return None
        try:
            return float(_croniter(self.cron, datetime.fromtimestamp(t, self.zone)).get_next(float))
        except Exception as exc:  # croniter's CroniterBadDateError: no date matches
            raise AgentAppsError(f"cron {self.cron!r} matches no date ({exc})") from None

    def latest(self, since: float, now: float) -> float:
        """The latest due time at or before ``now``, given that ``since`` (a due time,
        at or before ``now``) is one."""
        if self.every is not None:
            return since + math.floor((now - since) / self.every) * self.every
        if self.cron is None:
            return since
        # a cron time is a whole minute: step back from a minute after now
        it = _croniter(self.cron, datetime.fromtimestamp(now + 60, self.zone))
        due = float(it.get_prev(float))
        while due > now:
            due = float(it.get_prev(float))
        return max(due, since)

    def back(self, t: float, n: int) -> float:
        """The due time ``n`` due times before due time ``t``."""
        if self.every is not None:
            return t - n * self.every
        if self.cron is None or n <= 0:
            return t
        it = _croniter(self.cron, datetime.fromtimestamp(t, self.zone))
        for _ in range(n):
            due = float(it.get_prev(float))
        return due

    def count(self, since: float, now: float, limit: int) -> int:
        """How many due times lie in ``[since, now]``, ``since`` being one (counting
        stops at ``limit``: a cron expression is stepped through, ~0.1 ms a step)."""
        if since > now:
            return 0
        if self.every is not None:
            return min(limit, math.floor((now - since) / self.every) + 1)
        if self.cron is None:
            return 1
        it = _croniter(self.cron, datetime.fromtimestamp(since, self.zone))
        n = 1
        while n < limit and float(it.get_next(float)) <= now:
            n += 1
        return n

    @property
    def zone(self) -> tzinfo:
        return _zone(self.tz)

    def to_json(self) -> dict[str, Any]:
        if self.every is not None:
            return {"every": self.every}
        if self.cron is not None:
            return {"cron": self.cron, "tz": self.tz} if self.tz else {"cron": self.cron}
        return {"at": iso(self.at)}

    def __str__(self) -> str:
        if self.every is not None:
            return f"every {self.every:g}s"
        if self.cron is not None:
            return f"cron {self.cron}" + (f" ({self.tz})" if self.tz else "")
        return f"at {iso(self.at)}"


def iso(t: float | None) -> str | None:
    """A due time as ISO 8601 in local time with its offset (None stays None; a time no
    calendar can show, which only a schedule stored from Python can have, is its number)."""
    if t is None:
        return None
    try:
        return datetime.fromtimestamp(t, _zone(None)).isoformat(timespec="seconds")
    except (OverflowError, OSError, ValueError):
        return repr(t)


# -- internals -----------------------------------------------------------------------


def _check_cron(expr: object, skill: str) -> str:
    if not isinstance(expr, str) or not expr.strip():
        raise ArgsInvalid(skill, "cron", f"must be a cron expression ({_CRON_FIELDS}), not {expr!r}")
    expr = " ".join(expr.split())
    if expr.startswith("@"):
        if expr.lower() not in CRON_ALIASES:
            raise ArgsInvalid(skill, "cron", f"{expr!r} is not one of {', '.join(CRON_ALIASES)}")
        return expr.lower()
    fields = expr.split(" ")
    if len(fields) != 5:
        hint = " (seconds are not supported: use every)" if len(fields) == 6 else ""
        raise ArgsInvalid(
            skill, "cron", f"{expr!r} has {len(fields)} fields; a cron expression has 5: {_CRON_FIELDS}{hint}"
        )
    try:
        _croniter(expr, datetime.now(UTC))
    except AgentAppsError:  # croniter is not installed
        raise
    except Exception as exc:  # croniter's CroniterBadCronError names the bad field
        raise ArgsInvalid(skill, "cron", f"{expr!r} is not a valid cron expression: {exc}") from None
    return expr


def _check_tz(tz: object, skill: str) -> str | None:
    if tz is None:
        return None
    try:
        _zone(tz if isinstance(tz, str) else "")
    except Exception:
        raise ArgsInvalid(skill, "tz", f"{tz!r} is not a time zone name such as 'Europe/Paris' or 'UTC'") from None
    return str(tz)


def _parse_at(value: object, skill: str) -> float:
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            pass
        else:
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=_zone(None))
            return moment.timestamp()
    raise ArgsInvalid(
        skill, "at", f"must be an ISO 8601 time such as '2026-12-01T09:00' or '2026-12-01T09:00+01:00', not {value!r}"
    )


def _croniter(expr: str, start: datetime) -> Any:
    try:
        from croniter import croniter
    except ImportError:
        raise AgentAppsError(
            "cron schedules need the croniter package: pip install 'agent-apps[scheduler]'"
        ) from None
    return croniter(expr, start)


@lru_cache(maxsize=64)
def _zone(name: str | None) -> tzinfo:
    """A named zone, or the local one (``TZ``, else ``/etc/localtime``) with its
    daylight-saving rules; a fixed offset only where neither can be read."""
    from zoneinfo import ZoneInfo

    if name is not None:
        return ZoneInfo(name)
    env = os.environ.get("TZ", "").lstrip(":")
    if env:
        try:
            return ZoneInfo(env)
        except Exception:
            pass
    try:
        with open("/etc/localtime", "rb") as fh:
            return ZoneInfo.from_file(fh, key="localtime")
    except OSError:
        local = datetime.now().astimezone().tzinfo
        return local if local is not None else UTC
