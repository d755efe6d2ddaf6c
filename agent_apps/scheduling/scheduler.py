"""The scheduler: runs the due schedules of a state store, in the foreground.

::

    scheduler = Scheduler(ContextManager(search_path=["skills"]))
    await scheduler.run()          # until scheduler.stop() (Ctrl-C in agent-apps scheduler)

Each pass (:meth:`Scheduler.tick`) claims what is due in one write transaction of the
store (:meth:`~agent_apps.state.schedules.Schedules.claim`), so any number of schedulers
can share one store and a due time still runs once. Each claimed due time becomes one run:
the skill invoked under the authority of whoever made the schedule (as the child of an
invocation standing in for its maker, :func:`~agent_apps.authority.invoke_as`; a schedule
made from Python or the command line is a top-level call), unattended (the permission
policy's unattended defaults apply), recorded in ``runs`` under the run id made with the
claim. A run that
fails (the skill is gone, its args no longer fit, it raised) is logged and recorded, and
the scheduler goes on. Between passes it sleeps until the next due time, ``poll`` seconds
at most, so schedules made by other processes are seen within ``poll``.

Time comes from an injectable :class:`Clock`, so tests drive due times with a fake clock
instead of sleeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from typing import TYPE_CHECKING, Any, Protocol

from ..authority import invoke_as
from ..errors import AgentAppsError, Cancelled, SkillNotFound
from ..run_record import RunRecord
from ..timing import iso

if TYPE_CHECKING:
    from ..manager import ContextManager
    from ..state.schedules import Claim

__all__ = ["EVENTS_TOPIC", "Clock", "Scheduler", "SystemClock"]

log = logging.getLogger("agent_apps.scheduler")

#: The topic of the scheduler's events: ``{"type": "schedule-run", ...}`` when a run ends.
EVENTS_TOPIC = "scheduler"


class Clock(Protocol):
    """Where the scheduler's time comes from."""

    def time(self) -> float:
        """Seconds since the epoch."""
        ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The real clock."""

    def time(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class Scheduler:
    """Runs the due schedules of ``cm``'s state store (see the module docstring).

    ``poll``: the longest sleep between passes; ``concurrency``: runs at once (due times
    wait for a free slot); ``grace``: how late a due time may be and still count as on
    time for ``catch_up: none``.
    """

    def __init__(
        self,
        cm: ContextManager,
        *,
        clock: Clock | None = None,
        poll: float = 1.0,
        concurrency: int = 4,
        grace: float = 60.0,
    ) -> None:
        if poll <= 0 or concurrency < 1 or grace < 0:
            raise ValueError("poll must be > 0, concurrency >= 1 and grace >= 0")
        self.cm = cm
        self.store = cm.state
        self.clock: Clock = clock or SystemClock()
        self.poll = poll
        self.concurrency = concurrency
        self.grace = grace
        self._tasks: set[asyncio.Task[None]] = set()
        self._stop: asyncio.Event | None = None
        self._catalog_at = time.time()
        _ = cm.catalog  # built now: skills changed later are noticed by their mtime

    @property
    def running(self) -> int:
        """How many runs are in flight."""
        return len(self._tasks)

    async def tick(self) -> list[asyncio.Task[None]]:
        """Claim the due times that are due now (as many as there are free slots) and
        start their runs; returns the tasks of the runs started."""
        store = self.store
        free = self.concurrency - len(self._tasks)
        now = self.clock.time()
        if free <= 0:
            return []
        due = await store.call(store.schedules.next_due)
        if due is None or due > now:
            return []
        claimed = await store.call(store.schedules.claim, now, limit=free, grace=self.grace)
        for info, count in claimed.skipped:
            log.warning(
                "%s: %d missed due time%s skipped (catch_up: %s)", info.label, count, "s"[: count != 1], info.catch_up
            )
        if claimed.claims:
            self._refresh({c.schedule.ref for c in claimed.claims})
        tasks = []
        for claim in claimed.claims:
            task = asyncio.create_task(self._run(claim), name=f"schedule {claim.schedule.id} {claim.due_at}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            tasks.append(task)
        return tasks

    async def run(self) -> int:
        """Pass after pass until :meth:`stop` (or until cancelled); then cancel the runs
        in flight, record them as ``cancelled``, and return how many there were."""
        self._stop = stop = asyncio.Event()
        try:
            while not stop.is_set():
                await self.sync_subscriptions()
                await self.tick()
                await self._sleep(stop)
        except BaseException:
            await self.close()
            raise
        return await self.close()

    def stop(self) -> None:
        """End :meth:`run` (safe to call from a signal handler on the loop)."""
        if self._stop is not None:
            self._stop.set()

    async def close(self) -> int:
        """Cancel the runs in flight and wait until each is recorded; returns how many."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=30)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.cm.events.drain(), timeout=5)
        return len(tasks)

    async def wait_idle(self) -> None:
        """Wait until no run is in flight (tests, and :meth:`tick` callers)."""
        while self._tasks:
            await asyncio.wait(list(self._tasks))

    async def sync_subscriptions(self) -> None:
        """Subscribe the persisted event subscriptions as the store has them now (made
        or removed in another process since the last pass)."""
        store = self.store
        subscriptions = await store.call(store.subscriptions.list)
        self.cm.events.sync_persisted((s.id, s.topic, s.ref, s.authority) for s in subscriptions)

    # -- internals -------------------------------------------------------------------

    async def _sleep(self, stop: asyncio.Event) -> None:
        """Until the next due time (``poll`` at most), a run ends, or :meth:`stop`."""
        store = self.store
        due = await store.call(store.schedules.next_due)
        delay = self.poll if due is None else min(self.poll, max(due - self.clock.time(), 0.0))
        if len(self._tasks) >= self.concurrency:
            delay = self.poll  # nothing can start before a run ends, which wakes us
        waiters = [asyncio.ensure_future(self.clock.sleep(max(delay, 0.001))), asyncio.ensure_future(stop.wait())]
        try:
            await asyncio.wait([*waiters, *self._tasks], return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()

    def _refresh(self, refs: set[str]) -> None:
        """Rescan the search path if a skill about to run was added, changed or removed
        since the catalog was built (a scheduler runs for days; skills get edited)."""
        skills = self.cm.catalog.skills
        for ref in refs:
            skill = skills.get(ref)
            try:
                stale = skill is None or (skill.path is not None and os.stat(skill.path).st_mtime > self._catalog_at)
            except OSError:
                stale = True
            if stale:
                self.cm.reload()
                break
        else:
            return
        self._catalog_at = time.time()
        _ = self.cm.catalog

    async def _run(self, claim: Claim) -> None:
        """One run of one due time: invoke, record, log; never raises but cancellation."""
        from ..tools import approval

        info = claim.schedule
        log.info("%s: running %s (due %s, run %s)", info.label, info.ref, iso(claim.due_at), claim.run_id[:12])
        started = time.perf_counter()
        status, error = "done", None
        try:
            with approval.session(mode="unattended"):
                await invoke_as(self.cm, info.authority, info.ref, info.args, run=RunRecord(claim.run_id))
        except asyncio.CancelledError:
            status, error = "cancelled", "the scheduler stopped"
            raise
        except Cancelled as exc:
            status, error = "cancelled", str(exc)
        except SkillNotFound as exc:
            status, error = "error", f"SkillNotFound: {exc}"
            log.error("%s: %s; the schedule stays (schedule-delete removes it)", info.label, exc)
        except AgentAppsError as exc:
            status, error = "error", f"{type(exc).__name__}: {exc}"
            log.error("%s: run %s failed: %s", info.label, claim.run_id[:12], exc)
        except Exception as exc:  # a bug in a skill must not stop the scheduler
            status, error = "error", f"{type(exc).__name__}: {exc}"
            log.error("%s: run %s failed: %s", info.label, claim.run_id[:12], error, exc_info=True)
        finally:
            await self._record(claim, status, error, time.perf_counter() - started)

    async def _record(self, claim: Claim, status: str, error: str | None, seconds: float) -> None:
        info = claim.schedule
        store = self.store
        try:
            await store.call(store.schedules.finish_run, claim, status=status, error=error, now=self.clock.time())
        except Exception:
            log.error("%s: could not record run %s", info.label, claim.run_id[:12], exc_info=True)
        if status == "done":
            log.info("%s: run %s done in %.2fs", info.label, claim.run_id[:12], seconds)
        elif status == "cancelled":
            log.warning("%s: run %s cancelled: %s", info.label, claim.run_id[:12], error)
        event: dict[str, Any] = {
            "type": "schedule-run",
            "schedule": info.id,
            "name": info.name,
            "ref": info.ref,
            "run_id": claim.run_id,
            "due": iso(claim.due_at),
            "status": status,
            "error": error,
        }
        self.cm.events.emit(EVENTS_TOPIC, event)
