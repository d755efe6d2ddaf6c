"""What the console refuses, over plain HTTP against a real console process: requests
without the token, for another Host (DNS rebinding), from another origin or without the
form's value (CSRF), and anything outside its own assets; and the headers every answer
carries."""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys

import pytest

from agent_apps.console.guard import csrf_value

from .conftest import BOUND, scripted


def request(console, method, path, *, host=None, cookie=True, headers=None, body=None):
    conn = http.client.HTTPConnection(console.host, timeout=BOUND)
    sent = {"Host": console.host if host is None else host, **(headers or {})}
    if cookie:
        sent["Cookie"] = console.cookie
    conn.request(method, path, body=body, headers=sent)
    response = conn.getresponse()
    return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read().decode()


@pytest.fixture
def secret_run(manager):
    call = {"prompt": "P", "name": "secretive", "config": scripted([{"text": "the plans are in the vault"}])}
    manager.invoke_sync("agent", call)
    (run,) = manager.state.runs.list()
    return run


def test_the_token_is_needed_for_every_request(console, secret_run):
    for path in ("/", f"/runs/{secret_run.id}", "/assets/console.js", f"/live/runs/{secret_run.id}", "/nowhere"):
        status, _, body = request(console, "GET", path, cookie=False)
        assert status == 401 and "secretive" not in body and "vault" not in body, path
    status, _, _ = request(console, "GET", "/", headers={"Cookie": f"{console.cookie}x"}, cookie=False)
    assert status == 401
    status, headers, _ = request(console, "GET", f"/runs/{secret_run.id}?token={console.token}x", cookie=False)
    assert status == 401
    # the printed address: the token becomes a cookie and leaves the address
    status, headers, _ = request(console, "GET", f"/?token={console.token}&status=done", cookie=False)
    assert status == 303 and headers["location"] == "/?status=done"
    cookie = headers["set-cookie"]
    assert cookie.startswith(f"{console.cookie};") and "HttpOnly" in cookie and "SameSite=strict" in cookie
    status, _, body = request(console, "GET", f"/runs/{secret_run.id}")
    assert status == 200 and "the plans are in the vault" in body


def test_a_request_for_another_host_is_refused(console, secret_run):
    port = console.host.rsplit(":", 1)[1]
    for host in (f"rebound.example:{port}", f"127.0.0.1:{int(port) + 1}", "127.0.0.1", f"127.0.0.2:{port}", ""):
        status, _, body = request(console, "GET", f"/runs/{secret_run.id}", host=host)
        assert status == 421 and "vault" not in body, host
    assert request(console, "GET", f"/runs/{secret_run.id}", host=f"localhost:{port}")[0] == 200


def test_a_decision_from_another_origin_or_without_the_forms_value_is_refused(console, manager, secret_run):
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    decide = f"/runs/{secret_run.id}/decide"
    body = f"action=approve&csrf={csrf_value(console.token)}"  # even with the form's value
    for extra in ({}, {"Origin": "http://evil.example"}, {"Origin": "null"}, {"Referer": "http://evil.example/x"},
                  {"Origin": console.base.replace("127.0.0.1", "localhost")}):  # fmt: skip
        status, _, answer = request(console, "POST", decide, headers={**form, **extra}, body=body)
        assert status == 403 and "did not come from this console's own pages" in answer, extra
    same = {**form, "Origin": console.base}
    status, _, body = request(console, "POST", decide, headers=same, body="action=approve&csrf=guess")
    assert status == 403 and "did not come from this console" in body
    status, _, _ = request(console, "POST", decide, headers=same, body="action=approve", cookie=False)
    assert status == 401
    assert manager.state.runs.get(secret_run.id).status == "done"  # nothing was decided


def test_only_its_own_assets_are_served(console):
    status, headers, body = request(console, "GET", "/assets/console.js")
    assert status == 200 and headers["content-type"].startswith("text/javascript") and "EventSource" in body
    outside = ["/assets/..%2F..%2Fpyproject.toml", "/assets/../cli.py", "/assets/__init__.py", "/etc/passwd"]
    outside += ["/assets/%2e%2e/app.py", "/assets/console.js/..", "/static/console.js", "/assets/CONSOLE.JS"]
    for path in outside:
        assert request(console, "GET", path)[0] == 404, path


def test_every_answer_carries_a_strict_policy(console, secret_run):
    answers = [
        request(console, "GET", "/"),
        request(console, "GET", f"/runs/{secret_run.id}"),
        request(console, "GET", "/nowhere"),
        request(console, "GET", "/", cookie=False),
        request(console, "GET", "/", host="elsewhere.example"),
    ]
    for status, headers, _ in answers:
        policy = headers["content-security-policy"]
        assert "default-src 'none'" in policy and "script-src 'self'" in policy and "style-src 'self'" in policy
        assert "unsafe-inline" not in policy and "frame-ancestors 'none'" in policy, status
        assert headers["x-content-type-options"] == "nosniff" and headers["cache-control"] == "no-store"
    assert [status for status, _, _ in answers] == [200, 200, 404, 401, 421]
    assert "<script>" not in answers[1][2] and 'style="' not in answers[1][2]  # nothing inline


def console_command(tmp_path, *argv, state=None):
    env = {**os.environ, "AGENT_APPS_STATE": state or str(tmp_path / "state.db")}
    return subprocess.run([sys.executable, "-m", "agent_apps", "console", *argv], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=BOUND)  # fmt: skip


def test_the_command_refuses_what_it_cannot_serve_safely(tmp_path):
    for argv, said in (
        (["--host", "0.0.0.0"], "the console answers only requests for the address it serves"),
        (["--host", "::"], "the console answers only requests for the address it serves"),
        (["--host", "example.com"], "give an IP address (or localhost), not a name"),
        (["--port", "70000"], "must be a port number from 0 to 65535"),
    ):
        done = console_command(tmp_path, *argv)
        assert done.returncode == 2 and said in done.stderr and not done.stdout, (argv, done.stderr)
    done = console_command(tmp_path, state=":memory:")
    assert done.returncode == 2 and "needs a state store in a file" in done.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = console_command(tmp_path, "--port", str(port))
    assert done.returncode == 2 and f"cannot serve on 127.0.0.1:{port}" in done.stderr
