"""The console's web app: routes over the state store, behind :class:`~.guard.Guard`.

========================  ===============================================================
``GET /``                 runs (filters: status, skill, session, text; waiting first)
``GET /runs/RUN``         a run: its tree of agents, turn by turn, the timeline, approval
``GET /approvals``        the runs waiting for approval, with their pending calls
``GET /sessions[/ID]``    sessions; one as a conversation
``GET /schedules``        schedules and the last runs of each
``GET /live/...``         server-sent events that keep the runs, a run and approvals up to date
``POST /runs/RUN/decide`` approve, deny (with a reason) or skip the pending call, then
                          resume the run in a worker process
``POST /runs/RUN/resume`` resume a run whose call was decided
``GET /assets/NAME``      the console's own script, styles and icon (nothing else is served)
========================  ===============================================================

Store reads run on the store's own thread (``store.call``) and the rendering of a run's
page on a worker thread, so one long page does not stall the others' live updates.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from importlib import resources
from typing import Any
from urllib.parse import parse_qs

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from ..state import StateStore
from ..state.errors import NotFound, NotResumable, StateError
from ..state.journal import DECISIONS
from ..state.run_view import load_run
from ..state.runs import WAITING
from . import live, pages
from .guard import Guard, csrf_value
from .html import Html, layout, tag, url
from .run_page import run_main
from .workers import Workers

__all__ = ["ASSETS", "Console", "create_app"]

#: The files under ``assets/`` the console serves, and their types.
ASSETS = {
    "console.css": "text/css; charset=utf-8",
    "console.js": "text/javascript; charset=utf-8",
    "icon.svg": "image/svg+xml",
}
#: The largest form body a POST may send (a denial's reason is at most 2,000 characters).
FORM_LIMIT = 16_384


@dataclass
class Console:
    """What the routes share: the store, the token, the workers."""

    store: StateStore
    token: str
    workers: Workers
    #: Whether the server is stopping (live streams end then).
    stopping: Callable[[], bool] = lambda: False
    assets: dict[str, bytes] = field(default_factory=dict)

    @property
    def csrf(self) -> str:
        return csrf_value(self.token)


def create_app(console: Console, *, hosts: set[str], cookie: str) -> Guard:
    """The ASGI app: the routes below, behind the guard (Host, token, same origin)."""
    folder = resources.files("agent_apps.console") / "assets"
    console.assets = {name: (folder / name).read_bytes() for name in ASSETS}

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await console.workers.close()

    routes = [
        Route("/", runs),
        Route("/runs/{run_id}", run),
        Route("/runs/{run_id}/decide", decide, methods=["POST"]),
        Route("/runs/{run_id}/resume", resume, methods=["POST"]),
        Route("/approvals", approvals),
        Route("/sessions", sessions),
        Route("/sessions/{session_id}", session),
        Route("/schedules", schedules),
        Route("/live/runs", live_runs),
        Route("/live/approvals", live_approvals),
        Route("/live/runs/{run_id}", live_run),
        Route("/assets/{name}", asset),
    ]
    handlers: dict[Any, Any] = {NotFound: _not_found, StateError: _store_error, HTTPException: _http_error}
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers=handlers)
    app.state.console = console
    return Guard(app, token=console.token, hosts=hosts, cookie=cookie)


def _console(request: Request) -> Console:
    return request.app.state.console  # type: ignore[no-any-return]


async def _page(request: Request, title: str, main: Html, *, active: str, live_url: str | None = None,
                status: int = 200) -> HTMLResponse:  # fmt: skip
    console = _console(request)
    store = console.store
    waiting = await store.call(pages.waiting_count, store)
    page = layout(title, main, active=active, waiting=waiting, store=store.path, live=live_url)
    return HTMLResponse(page, status)


# -- pages --------------------------------------------------------------------------------


async def runs(request: Request) -> Response:
    store = _console(request).store
    filters = pages.RunFilters.of(request.query_params)
    latest = await store.call(store.runs.latest)
    listed, total, names = await store.call(filters.read, store)
    live_url = url("/live/runs", **filters.query(after=latest))
    return await _page(request, "Runs", pages.runs_page(filters, listed, total, names), active="runs",
                       live_url=live_url)  # fmt: skip


async def run(request: Request) -> Response:
    console = _console(request)
    store = console.store
    view = await store.call(load_run, store, request.path_params["run_id"])
    if view.run.id != request.path_params["run_id"]:  # a prefix: the page of the whole id
        return RedirectResponse(url("/runs", view.run.id), 303)
    worker = console.workers.get(view.run.id)
    main = await asyncio.to_thread(run_main, view, worker, console.csrf)
    live_url = url("/live/runs", view.run.id, after=view.run.seq)
    return await _page(request, f"Run {view.run.id[:12]}", main, active="runs", live_url=live_url)


async def approvals(request: Request) -> Response:
    console = _console(request)
    store = console.store
    latest = await store.call(store.runs.latest)
    waiting = await store.call(pages.waiting_runs, store)
    return await _page(request, "Approvals", pages.approvals(waiting, console.csrf), active="approvals",
                       live_url=url("/live/approvals", after=latest))  # fmt: skip


async def sessions(request: Request) -> Response:
    store = _console(request).store
    page = request.query_params.get("page", "1")
    main = await store.call(pages.sessions, store, int(page) if page.isdigit() and int(page) > 0 else 1)
    return await _page(request, "Sessions", main, active="sessions")


async def session(request: Request) -> Response:
    store = _console(request).store
    ident = request.path_params["session_id"]
    after = request.query_params.get("after", "")
    main = await store.call(pages.session, store, ident, int(after) if after.isdigit() else None)
    return await _page(request, f"Session {ident}", main, active="sessions")


async def schedules(request: Request) -> Response:
    store = _console(request).store
    return await _page(request, "Schedules", await store.call(pages.schedules, store), active="schedules")


async def asset(request: Request) -> Response:
    name = request.path_params["name"]
    body = _console(request).assets.get(name)
    if body is None:
        raise HTTPException(404)
    return Response(body, media_type=ASSETS[name])


# -- decisions --------------------------------------------------------------------------------


async def _form(request: Request) -> dict[str, str]:
    """The POSTed form, once its CSRF value is checked (403 otherwise)."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > FORM_LIMIT:
            raise HTTPException(413, "The form is too large.")
    form = {key: values[-1] for key, values in parse_qs(body.decode("utf-8", "replace")).items()}
    if not hmac.compare_digest(form.get("csrf", "").encode(), _console(request).csrf.encode()):
        raise HTTPException(403, "Refused: the form did not come from this console (reload the page).")
    return form


async def decide(request: Request) -> Response:
    """What ``agent-apps approve`` does, then resume the run in a worker."""
    console = _console(request)
    store = console.store
    form = await _form(request)
    action = form.get("action", "")
    reason = form.get("reason", "").strip() or None
    if action not in DECISIONS:
        raise HTTPException(400, f"A decision is one of {', '.join(DECISIONS)}.")
    if action == "deny" and reason is None:
        raise HTTPException(400, "Deny needs a reason: the agent's code gets it.")
    info = await store.call(store.runs.get, request.path_params["run_id"])
    try:
        await store.call(store.journal.decide, info.id, action, reason if action == "deny" else None)
    except NotResumable as exc:
        raise HTTPException(409, str(exc)) from None
    await console.workers.resume(info.id)
    return RedirectResponse(url("/runs", info.id), 303)


async def resume(request: Request) -> Response:
    console = _console(request)
    store = console.store
    await _form(request)
    info = await store.call(store.runs.get, request.path_params["run_id"])
    point = await store.call(store.journal.checkpoint, info.id)
    if point is None or (info.status == WAITING and point.decision is None):
        raise HTTPException(409, "This run has no decided call to continue from.")
    await console.workers.resume(info.id)
    return RedirectResponse(url("/runs", info.id), 303)


# -- live updates -------------------------------------------------------------------------------


def _stream(events: AsyncIterator[str]) -> StreamingResponse:
    headers = {"X-Accel-Buffering": "no"}
    return StreamingResponse(events, media_type="text/event-stream", headers=headers)


def _after(request: Request) -> int:
    """The change number the page shows: a reconnecting EventSource says it again."""
    value = request.headers.get("last-event-id") or request.query_params.get("after", "")
    return int(value) if value.isdigit() else -1


async def live_runs(request: Request) -> Response:
    console = _console(request)
    store = console.store
    filters = pages.RunFilters.of(request.query_params)

    def read() -> list[dict[str, Any]]:
        runs, total, _ = filters.read(store)
        return [
            {"id": "runs-summary", "parent": None, "html": pages.runs_summary(filters, total)},
            {"id": "runs-body", "parent": None, "html": f'<tbody id="runs-body">{pages.run_rows(runs)}</tbody>'},
        ]

    return _stream(live.list_events(store, _after(request), read=read, stopping=console.stopping))


async def live_approvals(request: Request) -> Response:
    console = _console(request)
    store = console.store

    def read() -> list[dict[str, Any]]:
        html = pages.approval_list(pages.waiting_runs(store), console.csrf)
        return [{"id": "approvals", "parent": None, "html": html}]

    return _stream(live.list_events(store, _after(request), read=read, stopping=console.stopping))


async def live_run(request: Request) -> Response:
    console = _console(request)
    info = await console.store.call(console.store.runs.get, request.path_params["run_id"])
    events = live.run_events(
        console.store,
        info.id,
        _after(request),
        workers=console.workers,
        csrf=console.csrf,
        stopping=console.stopping,
        render=asyncio.to_thread,
    )
    return _stream(events)


# -- errors -----------------------------------------------------------------------------------


async def _error_page(request: Request, status: int, title: str, message: str) -> Response:
    main = tag('<h1>{}</h1><p class="error" role="alert">{}</p><p><a href="/">All runs</a></p>', title, message)
    try:
        return await _page(request, title, main, active="", status=status)
    except StateError:  # the store itself is what failed: a page without its counts
        return HTMLResponse(layout(title, main, active="", waiting=0, store=""), status)


async def _not_found(request: Request, exc: Exception) -> Response:
    return await _error_page(request, 404, "Not found", str(exc))


async def _store_error(request: Request, exc: Exception) -> Response:
    return await _error_page(request, 503, "The state store failed", str(exc))


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        return await _error_page(request, 404, "Not found", "The console has no page at this address.")
    return await _error_page(request, exc.status_code, "Refused", str(exc.detail))

