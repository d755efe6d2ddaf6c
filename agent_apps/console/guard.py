"""What every request to the console goes through before a page sees it.

* **Host**: a request whose ``Host`` is not the address the console serves is refused
  (421): a web page on another site cannot reach the console through a DNS name that it
  points at 127.0.0.1 (DNS rebinding).
* **Token**: every request needs the token the console printed. The first visit brings
  it in the query (``/?token=...``); the answer sets it as a cookie (``HttpOnly``,
  ``SameSite=Strict``, named after the port, so two consoles do not share one) and
  redirects to the same address without it, so it stays out of the history. A request
  with neither is refused (401), with a page that says how to get in and nothing else.
* **Same origin** for anything but GET and HEAD: the ``Origin`` header (else the
  ``Referer``'s origin) must be the console's own, besides the cookie (which a
  cross-site request does not carry, being ``SameSite=Strict``); forms also carry a
  value derived from the token (:func:`csrf_value`), checked by the handler.
* **Headers** on every answer: a Content-Security-Policy that allows only the console's
  own script, styles and images (no inline script or style, no other origin, no
  framing), ``nosniff``, no caching, and a referrer only for the console itself; and
  ``Server-Timing``, how long the answer took to make.
"""

from __future__ import annotations

import hmac
import time
from urllib.parse import parse_qsl, urlencode, urlsplit

from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["SECURITY_HEADERS", "Guard", "csrf_value"]

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}

_LOCKED_OUT = (
    "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>agent-apps console</title></head>"
    "<body><h1>This console needs its token</h1><p>Open the address that <code>agent-apps console</code> "
    "printed when it started (it ends with <code>?token=...</code>).</p></body></html>"
)


def csrf_value(token: str) -> str:
    """The value forms carry: derived from the token, so a page elsewhere cannot know it."""
    return hmac.new(token.encode(), b"agent-apps console form", "sha256").hexdigest()


class Guard:
    """ASGI middleware: the checks of the module docstring, then ``app``."""

    def __init__(self, app: ASGIApp, *, token: str, hosts: set[str], cookie: str) -> None:
        self.app = app
        self.token = token
        self.hosts = hosts
        self.cookie = cookie

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self._refusal(scope)
        if refusal is not None:
            await _secured(refusal)(scope, receive, send)
            return

        started = time.perf_counter()

        async def send_secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers[name] = value
                # how long the answer took to make (browsers' developer tools show it)
                headers["Server-Timing"] = f"app;dur={(time.perf_counter() - started) * 1000:.1f}"
            await send(message)

        await self.app(scope, receive, send_secured)

    def _refusal(self, scope: Scope) -> Response | None:
        headers = Headers(scope=scope)
        host = headers.get("host", "")
        if host not in self.hosts:
            served = " or ".join(f"http://{h}/" for h in sorted(self.hosts))
            return PlainTextResponse(f"This console serves {served} only, not Host {host[:100]!r}.\n", 421)
        method = scope["method"]
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        supplied = next((value for key, value in query if key == "token"), None)
        if supplied is not None and method in ("GET", "HEAD") and self._is_token(supplied):
            rest = urlencode([(key, value) for key, value in query if key != "token"])
            response = RedirectResponse(scope["path"] + (f"?{rest}" if rest else ""), 303)
            response.set_cookie(self.cookie, self.token, httponly=True, samesite="strict", path="/")
            return response
        if not self._is_token(_cookie(headers, self.cookie)):
            return HTMLResponse(_LOCKED_OUT, 401)
        if method not in ("GET", "HEAD"):
            origin = headers.get("origin")
            if origin is None and headers.get("referer"):
                parts = urlsplit(headers["referer"])
                origin = f"{parts.scheme}://{parts.netloc}"
            if origin != f"http://{host}":
                return PlainTextResponse("Refused: the request did not come from this console's own pages.\n", 403)
        return None

    def _is_token(self, value: str | None) -> bool:
        return value is not None and hmac.compare_digest(value.encode(), self.token.encode())


def _cookie(headers: Headers, name: str) -> str | None:
    for header in headers.getlist("cookie"):
        for pair in header.split(";"):
            key, sep, value = pair.strip().partition("=")
            if sep and key == name:
                return value
    return None


def _secured(response: Response) -> Response:
    for name, value in SECURITY_HEADERS.items():
        response.headers[name] = value
    return response
