"""http-fetch against a real local server: results, caps, schemes, private addresses."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from tools_helpers import security

from agent_apps import AgentAppsError, ArgsInvalid
from agent_apps.tools import PermissionDenied
from agent_apps.tools.http import check_url

pytestmark = pytest.mark.anyio
RELEASE = threading.Event()


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        routes = {
            "/text": (200, "text/plain; charset=utf-8", "héllo".encode()),
            "/json": (200, "application/json", b'{"a": 1}'),
            "/big": (200, "text/plain", b"z" * (3 * 1024 * 1024)),
            "/binary": (200, "image/png", b"\x89PNG\x00\x00"),
            "/missing": (404, "text/plain", b"nope"),
        }
        if self.path == "/to-file":
            self.send_response(302)
            self.send_header("Location", "file:///etc/passwd")
            self.end_headers()
            return
        if self.path == "/to-text":
            self.send_response(302)
            self.send_header("Location", "/text")
            self.end_headers()
            return
        if self.path == "/hang":
            RELEASE.wait(30)
            return
        status, ctype, body = routes[self.path]
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    RELEASE.set()
    httpd.shutdown()


LOCAL = security(http={"allow_private": True})


async def test_fetch_text_and_json(cm, server):
    result = await cm.invoke("http-fetch", {"url": f"{server}/text"}, config=LOCAL)
    assert result == {
        "url": f"{server}/text",
        "status": 200,
        "content_type": "text/plain; charset=utf-8",
        "body": "héllo",
        "truncated": False,
    }
    result = await cm.invoke("http-fetch", {"url": f"{server}/json"}, config=LOCAL)
    assert result["body"] == '{"a": 1}'
    result = await cm.invoke("http-fetch", {"url": f"{server}/to-text"}, config=LOCAL)
    assert result["url"] == f"{server}/text" and result["body"] == "héllo"


async def test_error_status_is_a_result_not_an_exception(cm, server):
    result = await cm.invoke("http-fetch", {"url": f"{server}/missing"}, config=LOCAL)
    assert result["status"] == 404 and result["body"] == "nope"


async def test_body_is_capped(cm, server):
    result = await cm.invoke("http-fetch", {"url": f"{server}/big"}, config=LOCAL)
    assert result["truncated"] and result["body"].startswith("z" * 1024 * 1024)
    assert "body truncated by agent-apps at 1048576 bytes" in result["body"]
    result = await cm.invoke("http-fetch", {"url": f"{server}/big", "max_kb": 2}, config=LOCAL)
    assert result["body"].startswith("z" * 2048) and "at 2048 bytes" in result["body"]
    # The call may lower the cap but never raise it above security.http.max_kb.
    config = security(http={"allow_private": True, "max_kb": 1})
    result = await cm.invoke("http-fetch", {"url": f"{server}/big", "max_kb": 5000}, config=config)
    assert "at 1024 bytes" in result["body"]


async def test_binary_body_is_not_returned(cm, server):
    result = await cm.invoke("http-fetch", {"url": f"{server}/binary"}, config=LOCAL)
    assert result["body"] is None and result["content_type"] == "image/png"


async def test_head(cm, server):
    result = await cm.invoke("http-fetch", {"url": f"{server}/text", "method": "HEAD"}, config=LOCAL)
    assert result["status"] == 200 and result["body"] == ""


async def test_private_addresses_are_refused_by_default(cm, server):
    with pytest.raises(PermissionDenied, match="non-public address 127.0.0.1") as info:
        await cm.invoke("http-fetch", {"url": f"{server}/text"}, config=security())
    assert info.value.rule == "security.http.allow_private"


@pytest.mark.parametrize(
    "url", ["http://169.254.169.254/latest/meta-data/", "http://10.0.0.1/", "http://[::1]/", "http://0.0.0.0/"]
)
def test_metadata_and_private_ranges(url):
    with pytest.raises(PermissionDenied, match="non-public"):
        check_url(url, allow_private=False)


@pytest.mark.parametrize(
    "url", ["file:///etc/passwd", "ftp://example.com/x", "gopher://x", "javascript:alert(1)", "/etc/passwd"]
)
async def test_only_http_and_https(cm, url):
    with pytest.raises(ArgsInvalid, match="http-fetch: invalid args at url"):
        await cm.invoke("http-fetch", {"url": url}, config=LOCAL)


async def test_redirect_to_another_scheme_is_refused(cm, server):
    with pytest.raises(PermissionDenied, match="only http and https"):
        await cm.invoke("http-fetch", {"url": f"{server}/to-file"}, config=LOCAL)


async def test_a_hung_server_times_out(cm, server):
    with pytest.raises(AgentAppsError, match="http-fetch: cannot fetch"):
        await cm.invoke("http-fetch", {"url": f"{server}/hang", "timeout": 0.3}, config=LOCAL)


async def test_a_host_that_does_not_resolve_is_a_network_failure_not_a_refusal(cm):
    """Before: a DNS failure read "permission denied", which sends a user to the policy."""
    with pytest.raises(AgentAppsError) as info:
        await cm.invoke("http-fetch", {"url": "http://no-such-host.invalid/"}, config=security())
    assert not isinstance(info.value, PermissionDenied)
    assert str(info.value).startswith("http-fetch: cannot fetch http://no-such-host.invalid/: cannot resolve")
    assert "permission" not in str(info.value)


async def test_bad_params(cm):
    for args in (
        {"url": "https://x", "method": "POST"},
        {"url": "https://x", "headers": {"a": 1}},
        {"url": "https://x", "max_kb": 0},
    ):
        with pytest.raises(ArgsInvalid):
            await cm.invoke("http-fetch", args, config=LOCAL)
