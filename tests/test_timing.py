"""Due times of every / cron / at, and the clear errors of bad schedules."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from agent_apps.errors import ArgsInvalid
from agent_apps.timing import When

NOW = datetime(2026, 11, 23, 9, 1, 30, tzinfo=UTC).timestamp()


def parse(**args):
    return When.parse(args, now=NOW, skill="schedule-create")


def ts(*parts, tz=UTC):
    return datetime(*parts, tzinfo=tz).timestamp()


def test_every_is_anchored_at_creation_and_never_drifts():
    when = parse(every=10)
    first = when.first(NOW)
    assert first == NOW + 10 and when.after(first) == NOW + 20
    assert when.latest(first, NOW + 47) == NOW + 40
    assert when.count(first, NOW + 47, 100) == 4 and when.count(first, NOW + 47, 2) == 2
    assert when.back(NOW + 40, 3) == NOW + 10


def test_cron_due_times_in_a_time_zone_with_daylight_saving():
    when = parse(cron="*/5 * * * *", tz="UTC")
    assert when.first(NOW) == ts(2026, 11, 23, 9, 5)
    assert when.latest(ts(2026, 11, 23, 9, 5), ts(2026, 11, 23, 9, 17, 59)) == ts(2026, 11, 23, 9, 15)
    assert when.latest(ts(2026, 11, 23, 9, 5), ts(2026, 11, 23, 9, 15)) == ts(2026, 11, 23, 9, 15)
    assert when.count(ts(2026, 11, 23, 9, 5), ts(2026, 11, 23, 9, 20), 100) == 4
    paris = ZoneInfo("Europe/Paris")  # 02:30 does not exist on 2026-03-29
    daily = When.parse({"cron": "30 9 * * *", "tz": "Europe/Paris"}, now=ts(2026, 3, 28, 12, 0, tz=paris), skill="s")
    first = daily.first(ts(2026, 3, 28, 12, 0, tz=paris))
    assert first == ts(2026, 3, 29, 9, 30, tz=paris)
    assert daily.after(first) - first == 24 * 3600  # a calendar day, not a drifting 24 h + 1 h


def test_cron_aliases_and_spacing():
    assert parse(cron="@hourly").cron == "@hourly"
    assert parse(cron="  0   3 * *  1-5 ").cron == "0 3 * * 1-5"


def test_at_is_one_time_with_or_without_an_offset():
    when = parse(at="2026-12-01T09:00:00+01:00")
    assert when.first(NOW) == ts(2026, 12, 1, 8, 0) and when.after(when.at) is None
    assert parse(at="2026-12-01T08:00Z").at == ts(2026, 12, 1, 8, 0)


@pytest.mark.parametrize(
    ("args", "path", "text"),
    [
        ({"cron": "* * * * * *"}, "cron", "has 6 fields; a cron expression has 5"),
        ({"cron": "* * * *"}, "cron", "has 4 fields"),
        ({"cron": "61 * * * *"}, "cron", "not a valid cron expression"),
        ({"cron": "0 0 31 2 *"}, "cron", "matches no date"),
        ({"cron": "@reboot"}, "cron", "is not one of @hourly"),
        ({"cron": "*/5 * * * *", "tz": "Mars/Olympus"}, "tz", "not a time zone name"),
        ({"every": 5, "tz": "UTC"}, "tz", "cron schedules only"),
        ({"every": 0}, "every", "greater than 0"),
        ({"every": -3}, "every", "greater than 0"),
        ({"every": float("inf")}, "every", "greater than 0"),
        ({"every": True}, "every", "greater than 0"),
        ({"at": "2020-01-01T00:00"}, "at", "is in the past"),
        ({"at": "tomorrow"}, "at", "ISO 8601"),
        ({}, "", "give exactly one of every (seconds), cron or at; got none"),
        ({"every": 5, "cron": "* * * * *"}, "", "got every, cron"),
    ],
)
def test_bad_schedules_name_the_arg(args, path, text):
    with pytest.raises(ArgsInvalid) as info:
        parse(**args)
    assert info.value.path == path and text in str(info.value) and "schedule-create" in str(info.value)
