"""The console's list pages: runs, approvals, sessions (and one session as a
conversation) and schedules. Each takes what it shows from the store's public API and
returns the page's ``<main>`` content (see :mod:`agent_apps.console.html`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..state.run_view import duration
from ..state.runs import STATUSES, WAITING
from .highlight import highlight
from .html import Html, cost, esc, join, json_text, tag, url, when

if TYPE_CHECKING:
    from ..state import RunInfo, StateStore

__all__ = [
    "PAGE_SIZE",
    "RunFilters",
    "approval_list",
    "approvals",
    "run_rows",
    "runs_page",
    "runs_summary",
    "schedules",
    "session",
    "sessions",
    "waiting_runs",
]

#: Rows on one page of runs or sessions.
PAGE_SIZE = 50
#: Messages on one page of a session.
MESSAGES_PAGE = 200
#: Last runs shown for each schedule.
SCHEDULE_RUNS = 5


@dataclass(frozen=True)
class RunFilters:
    """What the runs page shows: filters from its query string, and the page."""

    status: str | None = None
    skill: str | None = None
    session: str | None = None
    text: str | None = None
    page: int = 1

    @classmethod
    def of(cls, query: Any) -> RunFilters:
        def value(key: str) -> str | None:
            text = str(query.get(key) or "").strip()
            return text[:200] or None

        status = value("status")
        page = value("page") or "1"
        return cls(
            status if status in STATUSES else None,
            value("skill"),
            value("session"),
            value("q"),
            max(1, int(page)) if page.isdigit() else 1,
        )

    def query(self, **changes: Any) -> dict[str, Any]:
        values: dict[str, Any] = {"status": self.status, "skill": self.skill, "session": self.session, "q": self.text}
        values["page"] = self.page if self.page > 1 else None
        return {**values, **changes}

    def read(self, store: StateStore) -> tuple[list[RunInfo], int, list[str]]:
        """The runs of the page (waiting for approval first), how many match, the names."""
        filters = {"status": self.status, "name": self.skill, "session": self.session, "text": self.text}
        runs = store.runs.list(**filters, waiting_first=True, limit=PAGE_SIZE, offset=(self.page - 1) * PAGE_SIZE)
        return runs, store.runs.count(**filters), store.runs.names()


def _status(status: str) -> Html:
    return tag('<span class="status s-{}">{}</span>', status, status)


def _options(values: list[str], chosen: str | None, anything: str) -> Html:
    options = [tag('<option value="">{}</option>', anything)]
    for value in values:
        selected = Html(" selected") if value == chosen else Html("")
        options.append(tag('<option value="{}"{}>{}</option>', value, selected, value))
    return join(options)


def run_rows(runs: list[RunInfo]) -> Html:
    """The rows of the runs table (also sent alone by the live updates)."""
    rows = []
    for run in runs:
        status = run.status
        took = duration((run.ended_at - run.started_at) * 1000) if run.ended_at else ("running" if status == "running"
                                                                                 else "–")  # fmt: skip
        session = tag('<a href="{}">{}</a>', url("/sessions", run.session_id), run.session_id) if run.session_id \
            else Html("–")  # fmt: skip
        rows.append(
            tag(
                '<tr class="r-{}"><td><a href="{}"><code>{}</code></a></td><td>{}</td><td>{}</td><td>{}</td>'
                '<td>{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td></tr>',
                status,
                url("/runs", run.id),
                run.id[:12],
                _status(status),
                run.name,
                session,
                when(run.started_at),
                took,
                f"{run.input_tokens:,} / {run.output_tokens:,}",
                cost(run.cost_usd) if run.cost_usd else "–",
            )
        )
    if not rows:
        rows.append(Html('<tr><td colspan="8" class="empty">No runs match.</td></tr>'))
    return join(rows)


def runs_summary(filters: RunFilters, total: int) -> Html:
    pages = max(1, math.ceil(total / PAGE_SIZE))
    newer = tag('<a rel="prev" href="{}">Newer</a>', url("/", **filters.query(page=filters.page - 1 or None))) \
        if filters.page > 1 else Html("")  # fmt: skip
    older = tag('<a rel="next" href="{}">Older</a>', url("/", **filters.query(page=filters.page + 1))) \
        if filters.page < pages else Html("")  # fmt: skip
    return tag(
        '<div id="runs-summary"><p>{} runs · page {} of {}</p><nav class="pages" aria-label="Pages">{} {}</nav></div>',
        f"{total:,}",
        filters.page,
        pages,
        newer,
        older,
    )


def runs_page(filters: RunFilters, runs: list[RunInfo], total: int, names: list[str]) -> Html:
    form = tag(
        '<form class="filters" method="get" action="/" role="search" aria-label="Filter runs">'
        '<label>Status <select name="status">{}</select></label>'
        '<label>Skill <select name="skill">{}</select></label>'
        '<label>Session <input name="session" value="{}" size="14"></label>'
        '<label>Text <input type="search" name="q" value="{}" size="20"></label>'
        '<button type="submit">Filter</button> <a href="/">Clear</a></form>',
        _options(list(STATUSES), filters.status, "any"),
        _options(names, filters.skill, "any"),
        filters.session or "",
        filters.text or "",
    )
    return tag(
        "<h1>Runs</h1>{}{}"
        '<table class="runs"><thead><tr><th scope="col">Run</th><th scope="col">Status</th><th scope="col">Skill</th>'
        '<th scope="col">Session</th><th scope="col">Started</th><th scope="col">Duration</th>'
        '<th scope="col">Tokens in / out</th><th scope="col">Cost</th></tr></thead>'
        '<tbody id="runs-body">{}</tbody></table>',
        form,
        runs_summary(filters, total),
        run_rows(runs),
    )


Waiting = list[tuple["RunInfo", "dict[str, Any] | None", "dict[str, Any] | None"]]


def waiting_runs(store: StateStore, limit: int = 200) -> Waiting:
    """The runs waiting for approval, newest first, with their pending calls and decisions."""
    waiting: Waiting = []
    for info in store.runs.list(status=WAITING, limit=limit):
        point = store.journal.checkpoint(info.id)
        waiting.append((info, point.pending if point else None, point.decision if point else None))
    return waiting


def approvals(waiting: Waiting, csrf: str) -> Html:
    return tag("<h1>Approvals</h1>{}", approval_list(waiting, csrf))


def approval_list(waiting: Waiting, csrf: str) -> Html:
    """Runs waiting for approval, each with its pending call and the buttons."""
    items = []
    for run, pending, decision in waiting:
        pending = pending or {}
        action = url("/runs", run.id, "decide")
        hidden = tag('<input type="hidden" name="csrf" value="{}">', csrf)
        if decision is not None:
            buttons = tag(
                '<p>Decided: <b>{}</b>. <form method="post" action="{}" class="inline">{}'
                '<button type="submit">Resume</button></form></p>',
                decision.get("action"),
                url("/runs", run.id, "resume"),
                hidden,
            )
        else:
            buttons = tag(
                '<div class="decide"><form method="post" action="{}">{}'
                '<button type="submit" name="action" value="approve" class="approve">Approve</button> '
                '<button type="submit" name="action" value="skip">Skip</button></form>'
                '<form method="post" action="{}" class="deny">{}<input type="hidden" name="action" value="deny">'
                '<label>Reason <input name="reason" required maxlength="2000"></label> '
                '<button type="submit" class="deny">Deny</button></form></div>',
                action,
                hidden,
                action,
                hidden,
            )
        items.append(
            tag(
                '<li class="approval"><h2><a href="{}">Run <code>{}</code></a> · {} · {}</h2>'
                "<p>Agent <b>{}</b> asks to call <b>{}</b>:</p>"
                '<pre class="json" aria-label="Arguments">{}</pre>{}</li>',
                url("/runs", run.id),
                run.id[:12],
                run.name,
                when(run.started_at),
                pending.get("agent_name"),
                pending.get("skill"),
                json_text(pending.get("args")),
                buttons,
            )
        )
    body = join(items) if items else Html('<li class="empty">No run is waiting for approval.</li>')
    return tag('<ul class="approvals" id="approvals">{}</ul>', body)


def sessions(store: StateStore, page: int) -> Html:
    listed = store.sessions.list()
    pages = max(1, math.ceil(len(listed) / PAGE_SIZE))
    page = min(page, pages)
    rows = [
        tag(
            '<tr><td><a href="{}">{}</a></td><td class="num">{}</td><td class="num">~{}</td><td>{}</td></tr>',
            url("/sessions", info.id),
            info.id,
            info.messages,
            f"{info.tokens:,}",
            when(info.updated_at),
        )
        for info in listed[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]
    ]
    if not rows:
        rows.append(Html('<tr><td colspan="4" class="empty">No sessions yet.</td></tr>'))
    nav = join(
        [
            tag('<a rel="prev" href="{}">Newer</a> ', url("/sessions", page=page - 1)) if page > 1 else Html(""),
            tag('<a rel="next" href="{}">Older</a>', url("/sessions", page=page + 1)) if page < pages else Html(""),
        ]
    )
    return tag(
        '<h1>Sessions</h1><p>{} sessions · page {} of {}</p><table class="sessions"><thead><tr>'
        '<th scope="col">Session</th><th scope="col">Messages</th><th scope="col">Tokens</th>'
        '<th scope="col">Updated</th></tr></thead><tbody>{}</tbody></table><nav class="pages" aria-label="Pages">{}'
        "</nav>",
        len(listed),
        page,
        pages,
        join(rows),
        nav,
    )


def session(store: StateStore, session_id: str, after: int | None) -> Html:
    """A session's messages as a conversation, a page of them (the latest by default)."""
    info = store.sessions.get(session_id)
    start = max(0, info.messages - MESSAGES_PAGE) if after is None else max(0, min(after, info.messages))
    entries = store.sessions.messages(session_id, after=start)[:MESSAGES_PAGE]
    runs = store.runs.list(session=session_id, limit=20)
    parts = []
    if start > 0:
        earlier = url("/sessions", session_id, after=max(0, start - MESSAGES_PAGE))
        parts.append(tag('<p><a href="{}">Earlier messages</a></p>', earlier))
    if info.summary_through and start < info.summary_through:
        what = info.summary or "left out (summarizing failed)"
        parts.append(tag('<div class="msg summary"><span class="role">Summary of messages 1-{}</span>'
                         '<div class="text">{}</div></div>', info.summary_through, what))  # fmt: skip
    for entry in entries:
        parts.append(_message(entry.seq, entry.message))
    if entries and entries[-1].seq < info.messages:
        later = url("/sessions", session_id, after=entries[-1].seq)
        parts.append(tag('<p><a href="{}">Later messages</a></p>', later))
    side = [tag("<p>{} messages, ~{} tokens; updated {}</p>", info.messages, f"{info.tokens:,}", when(info.updated_at))]
    if info.memory:
        side.append(tag('<details id="memory"><summary>Memory</summary><pre class="json">{}</pre></details>',
                        json_text(info.memory)))  # fmt: skip
    if runs:
        links = join(tag('<li><a href="{}"><code>{}</code></a> {} {}</li>', url("/runs", r.id), r.id[:12],
                         _status(r.status), when(r.started_at)) for r in runs)  # fmt: skip
        side.append(tag('<h2>Runs</h2><ul class="plain">{}</ul>', links))
    return tag(
        '<h1>Session <code>{}</code></h1><div class="session"><div class="conversation">{}</div>'
        '<aside aria-label="About the session">{}</aside></div>',
        session_id,
        join(parts) or Html('<p class="empty">No messages.</p>'),
        join(side),
    )


def _message(seq: int, message: Mapping[str, Any]) -> Html:
    role = str(message.get("role") or "")
    label = {"user": "User", "assistant": "Assistant", "tool": "Tool result", "summary": "Summary"}.get(role, role)
    if role == "tool":
        label += f" ({message.get('name')})" + (" — error" if message.get("error") else "")
    body = [tag('<div class="text">{}</div>', message.get("text") or "")] if message.get("text") else []
    for call in message.get("tool_calls") or ():
        code = (call.get("input") or {}).get("code")
        shown = highlight(code) if isinstance(code, str) else esc(json_text(call.get("input")))
        body.append(tag('<div class="call-head"><span class="tool">{}</span></div><pre class="code"><code>{}</code>'
                        "</pre>", call.get("name"), shown))  # fmt: skip
    if role == "tool":
        body = [tag('<details id="m{}"><summary>{} characters</summary><pre>{}</pre></details>', seq,
                    len(message.get("text") or ""), message.get("text") or "")]  # fmt: skip
    return tag('<div class="msg m-{}" id="msg-{}"><span class="role">#{} {}</span>{}</div>', role, seq, seq, label,
               join(body))  # fmt: skip


def schedules(store: StateStore) -> Html:
    """Every schedule: what runs when, and its last runs."""
    items = []
    for info in store.schedules.list():
        last = store.schedules.runs_of(info.id, last=SCHEDULE_RUNS)
        runs = join(
            tag('<li><a href="{}"><code>{}</code></a> due {} {}{}</li>', url("/runs", r["run_id"]), r["run_id"][:12],
                when(r["due_at"]), _status(r["status"]), tag(' <span class="error">{}</span>', r["error"])
                if r.get("error") else Html(""))
            for r in reversed(last)
        )  # fmt: skip
        items.append(
            tag(
                '<li class="schedule"><h2>{} <span class="muted">{}</span></h2><dl class="facts">'
                "<div><dt>Runs</dt><dd><code>{}</code></dd></div><div><dt>When</dt><dd>{}</dd></div>"
                "<div><dt>Next</dt><dd>{}</dd></div><div><dt>Catch up</dt><dd>{}</dd></div>"
                "<div><dt>Ran</dt><dd>{}, {} missed</dd></div></dl>"
                '<details id="args-{}"><summary>Args</summary><pre class="json">{}</pre></details>'
                "<h3>Last runs</h3><ul class=\"plain\">{}</ul></li>",
                info.name or info.id,
                info.id if info.name else "",
                info.ref,
                str(info.when),
                when(info.next_at) if info.next_at else "no due time left",
                info.catch_up,
                "once" if info.runs == 1 else f"{info.runs} times",
                info.missed,
                info.id,
                json_text(info.args),
                runs or Html('<li class="empty">none yet</li>'),
            )
        )
    body = join(items) if items else Html('<p class="empty">No schedules. The schedule-create skill makes them.</p>')
    return tag('<h1>Schedules</h1><ul class="schedules">{}</ul>', body)


def waiting_count(store: StateStore) -> int:
    return store.runs.count(status=WAITING)
