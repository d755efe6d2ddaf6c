"""Live updates: pages follow the store as runs change, over server-sent events.

Runs usually run in other processes than the console, so the store is where their
progress meets it: every write to a run or its agents takes a change number
(``store.runs.latest()``, ``store.runs.changed(run_id, after)``), and an agent's turn in
flight is written as it changes, at most every 50 ms (``agent_apps.agent.recorder``).
Each open page has a stream here that polls the store for changes after the number
it saw: a run's page every :data:`RUN_POLL` seconds, the runs list and the approvals
every :data:`LIST_POLL`. What changed is rendered again, only the fragments whose
fingerprints changed, and sent as one ``patch`` event: a list of ``{id, parent, html}``
(``html`` null: remove the element), which ``console.js`` applies by element id. So a
change reaches an open page within the recorder's interval plus the poll interval,
plus the time to render.

A stream that starts, or starts again (EventSource reconnects by itself), with a page
older than the store sends everything over again.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..state.errors import NotFound
from ..state.run_view import build
from ..state.runs import AgentInfo, RunInfo
from .run_page import Fragment, fragments

if TYPE_CHECKING:
    from ..state import StateStore
    from ..state.journal import Checkpoint
    from .workers import Workers

__all__ = ["LIST_POLL", "RUN_POLL", "list_events", "run_events"]

#: Seconds between two looks at the store for a run's page.
RUN_POLL = 0.05
#: Seconds between two looks at the store for the runs list.
LIST_POLL = 0.25
#: Seconds between two comments on an idle stream (a closed page is noticed then).
KEEPALIVE = 15.0


def _event(kind: str, data: Any, seq: int | None = None) -> str:
    head = f"id: {seq}\n" if seq is not None else ""
    return f"{head}event: {kind}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


async def _ticks(poll: float, stopping: Callable[[], bool]) -> AsyncIterator[bool]:
    """Yield every ``poll`` seconds (True when a keep-alive is due) until ``stopping()``."""
    loop = asyncio.get_running_loop()
    quiet_since = loop.time()
    while not stopping():
        await asyncio.sleep(poll)
        now = loop.time()
        keepalive = now - quiet_since >= KEEPALIVE
        if keepalive:
            quiet_since = now
        yield keepalive


async def run_events(
    store: StateStore,
    run_id: str,
    after: int,
    *,
    workers: Workers,
    csrf: str,
    stopping: Callable[[], bool],
    render: Callable[[Callable[[], Any]], Awaitable[Any]],
) -> AsyncIterator[str]:
    """The stream of a run's page, which shows the run as of change number ``after``.

    ``render(fn)`` runs ``fn`` off the event loop (rendering a long run takes a while)."""
    agents: dict[str, AgentInfo] = {}
    sent: dict[str, str] = {}
    seen = -1
    worker_version = -1
    first = True
    run: RunInfo | None = None
    point: Checkpoint | None = None
    async for keepalive in _ticks(RUN_POLL, stopping):
        try:
            changed = await store.call(store.runs.changed, run_id, seen)
        except NotFound:
            yield _event("gone", {"run": run_id})
            return
        if changed is None and workers.version == worker_version:
            if keepalive:
                yield ": still here\n\n"
            continue
        worker_version = workers.version
        if changed is not None:
            run, updated = changed
            seen = run.seq
            agents.update((agent.id, agent) for agent in updated)
            point = await store.call(store.journal.checkpoint, run.id)
        if run is None:
            continue
        view = build(run, sorted(agents.values(), key=lambda a: (a.started_at, a.id)), point)
        worker = workers.get(run.id)
        parts = fragments(view, worker, csrf)
        if first:  # the page shows the run as of `after`: if that is now, it has every fragment
            first = False
            if seen == after:
                sent = {part.id: part.key for part in parts}
                continue

        ops = await render(functools.partial(_patch, parts, sent))
        if ops:
            yield _event("patch", ops, seen)


def _patch(parts: list[Fragment], sent: dict[str, str]) -> list[dict[str, Any]]:
    """The operations that bring a page showing ``sent`` (fragment id: fingerprint) to
    ``parts``; ``sent`` is updated to match."""
    ops: list[dict[str, Any]] = []
    now = {part.id: part for part in parts}
    for part in parts:
        if sent.get(part.id) == part.key:
            continue
        new = part.id not in sent
        ops.append({"id": part.id, "parent": part.parent, "html": part.render()})
        sent[part.id] = part.key
        if new and (part.parent == "agents" or part.parent.endswith("-children")):
            # a new agent is rendered whole: its parts are on the page with it
            for inner in parts:
                if inner.id.startswith(part.id + "-"):
                    sent[inner.id] = inner.key
    for gone in [ident for ident in sent if ident not in now]:
        ops.append({"id": gone, "parent": None, "html": None})
        del sent[gone]
    return ops


async def list_events(
    store: StateStore,
    after: int,
    *,
    read: Callable[[], list[dict[str, Any]]],
    stopping: Callable[[], bool],
) -> AsyncIterator[str]:
    """The stream of a list page (runs, approvals): ``read()``, on the store's thread,
    gives its operations again whenever any run changed."""
    seen = after
    async for keepalive in _ticks(LIST_POLL, stopping):
        latest = await store.call(store.runs.latest)
        if latest == seen:
            if keepalive:
                yield ": still here\n\n"
            continue
        seen = latest
        yield _event("patch", await store.call(read), seen)
