"""Scheduling: run skills later, at due times kept in the state store.

* :mod:`agent_apps.timing`: ``every`` / ``cron`` / ``at`` and their due times (:class:`When`),
  below the store that keeps them;
* :mod:`.scheduler`: the :class:`Scheduler` that claims and runs due times
  (``agent-apps scheduler``);
* the schedules themselves are ``store.schedules`` (:mod:`agent_apps.state.schedules`),
  made and removed with the bundled ``schedule-create`` / ``schedule-delete`` skills.

See ``docs/scheduling.md``.
"""

from __future__ import annotations

from ..timing import CATCH_UP, When
from .scheduler import EVENTS_TOPIC, Clock, Scheduler, SystemClock

__all__ = ["CATCH_UP", "EVENTS_TOPIC", "Clock", "Scheduler", "SystemClock", "When"]
