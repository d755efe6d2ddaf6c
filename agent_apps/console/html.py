"""HTML built from escaped parts: everything a run recorded is untrusted.

Model output, tool results, file contents, skill names and ids all reach the page, and
any of them may hold markup. So text becomes HTML only through :func:`esc`, which
escapes it, or :func:`tag`, whose template is ours and whose values are escaped; an
:class:`Html` value (already escaped) is never escaped twice. Pages carry no inline
script or style at all (the Content-Security-Policy forbids them): behaviour comes
from ``console.js`` and looks from ``console.css``.
"""

from __future__ import annotations

import html
import json
import time
from typing import Any
from urllib.parse import quote, urlencode

from ..state.run_view import clock, money
from ..terminal import printable

__all__ = ["Html", "cost", "esc", "join", "json_text", "layout", "tag", "url", "when"]


class Html(str):
    """A string that is HTML already (escaped, or built from escaped parts)."""

    __slots__ = ()


def esc(value: Any) -> Html:
    """``value`` as HTML text: escaped, unless it is :class:`Html` already. Characters
    that steer how text shows (control characters, bidirectional overrides) are shown
    as escapes, as on a terminal (see :mod:`agent_apps.terminal`)."""
    if isinstance(value, Html):
        return value
    return Html(html.escape(printable("" if value is None else str(value)), quote=True))


def tag(template: str, *values: Any, **named: Any) -> Html:
    """``template`` (our own, with ``{}`` fields) filled with escaped values."""
    return Html(template.format(*(esc(v) for v in values), **{k: esc(v) for k, v in named.items()}))


def join(parts: Any, sep: str = "") -> Html:
    return Html(esc(sep).join(esc(part) for part in parts))


def url(path: str, *parts: str, **query: Any) -> str:
    """``path`` with ``parts`` appended, each quoted (ids may hold any character), and a
    query of the values that are not None or empty."""
    full = path.rstrip("/") + "".join("/" + quote(str(part), safe="") for part in parts) if parts else path
    kept = {k: v for k, v in query.items() if v not in (None, "")}
    return full + ("?" + urlencode(kept) if kept else "")


def when(at: float | None) -> Html:
    """A time, local, as a ``<time>`` element."""
    if not at:
        return Html("–")
    return tag('<time datetime="{}">{}</time>', time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(at)), clock(at))


def cost(value: Any) -> str:
    return "–" if value is None else money(value)


def json_text(value: Any, *, width: int = 100) -> str:
    """A value to show: a string as it is, other values as JSON, on one line when that
    fits in ``width`` characters, else indented."""
    if isinstance(value, str):
        return value
    line = json.dumps(value, ensure_ascii=False, default=str)
    return line if len(line) <= width else json.dumps(value, ensure_ascii=False, indent=2, default=str)


def layout(title: str, main: Html, *, active: str, waiting: int, store: str, live: str | None = None) -> Html:
    """A whole page: the navigation, ``main``, and where the live updates come from."""
    links = [("/", "Runs", "runs"), ("/approvals", "Approvals", "approvals"), ("/sessions", "Sessions", "sessions"),
             ("/schedules", "Schedules", "schedules")]  # fmt: skip
    nav = []
    for href, label, key in links:
        current = Html(' aria-current="page"') if key == active else Html("")
        count = tag(' <span class="count">{}</span>', waiting) if key == "approvals" and waiting else Html("")
        nav.append(tag('<a href="{}"{}>{}{}</a>', href, current, label, count))
    live_attr = tag(' data-live="{}"', live) if live else Html("")
    return tag(
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        "<title>{} · agent-apps console</title>"
        '<link rel="icon" href="/assets/icon.svg"><link rel="stylesheet" href="/assets/console.css">'
        '<script src="/assets/console.js" defer></script>'
        '</head><body{}><header><a class="brand" href="/">agent-apps</a><nav aria-label="Main">{}</nav>'
        '<span class="store" title="the state store">{}</span><span class="live-state" role="status"></span>'
        "</header><main>{}</main></body></html>",
        title,
        live_attr,
        join(nav),
        store,
        main,
    )
