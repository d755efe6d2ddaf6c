"""Hostile mounted MCP servers: the MCP client (agent_apps/mcp/client.py) against
hostile_server.py, which writes raw JSON-RPC lines the ``mcp`` package would refuse to
send, and against an HTTP server that redirects elsewhere.

What must hold (docs/security.md, "What a peer can do"): an answer the client cannot
read fails its call at once with a clear error; what the ``mcp`` library logs about a
broken server goes to that server's log, not the terminal; the log stays under its cap
while the server runs; a tool's description, name, schemas and number are capped, with
a warning naming the server and the tool; a redirect off the server's host is refused.
"""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

from agent_apps import ContextManager, SkillFailed
from agent_apps.mcp.client import close_servers
from agent_apps.stubs import skill_stub

pytestmark = pytest.mark.anyio

HOSTILE = Path(__file__).with_name("hostile_server.py")


@pytest.fixture
def mount(tmp_path):
    managers = []

    def mount(mode=None, **spec):
        if mode is not None:
            spec = {"command": sys.executable, "args": [str(HOSTILE), mode], **spec}
        home = tmp_path / "home"
        home.mkdir(exist_ok=True)
        (home / "config.yaml").write_text(yaml.safe_dump({"mcp_servers": {"h": spec}}))
        cm = ContextManager(
            search_path=[], cwd=tmp_path, home=home, env=False, project=False, user=False, entry_points=False
        )
        managers.append(cm)
        return cm

    yield mount
    for cm in managers:
        close_servers(cm)


# -- 8. an answer nested 200,000 deep ---------------------------------------------------------------


async def test_an_answer_nested_too_deep_fails_its_call_at_once(mount, capfd):
    cm = mount("deep", timeout=600)  # without the fix: no answer for ten minutes
    with pytest.raises(SkillFailed) as info:
        await cm.invoke("h-poke")
    text = str(info.value)
    assert "MCP server 'h', tool 'poke'" in text
    assert "could not read the server's answer: JSON nested deeper than 128 levels" in text
    assert "\n" not in text and len(text) < 500
    assert "Traceback" not in capfd.readouterr().err
    with pytest.raises(SkillFailed, match="nested deeper"):  # the connection lives on: the next call is answered
        await cm.invoke("h-poke")
    log = (cm.home / "logs" / "mcp-h.log").read_text()
    assert "could not read the answer to request" in log


# -- 7. a server that prints to stdout ---------------------------------------------------------------


def test_a_chatty_stdout_fills_the_log_not_the_terminal(tmp_path):
    home = Path(os.environ["AGENT_APPS_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    server = {"command": sys.executable, "args": [str(HOSTILE), "chatty"]}
    (home / "config.yaml").write_text(yaml.safe_dump({"mcp_servers": {"h": server}}))
    command = [sys.executable, "-m", "agent_apps", "invoke", "h-poke"]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "poked"
    assert "Traceback" not in done.stderr and len(done.stderr) < 1000, done.stderr[-3000:]  # was 281 KB
    log = (home / "logs" / "mcp-h.log").read_text()
    assert log.count("Failed to parse JSONRPC message from server") == 300
    assert "debug: handling the poke, step 299" in log


# -- 6. a server that writes 48 MB to stderr ----------------------------------------------------------------


async def test_a_servers_log_stays_under_its_cap_while_it_runs(mount):
    cm = mount("stderr", log_kb=64)
    assert await cm.invoke("h-poke") == "poked"  # one call writes 48 MB to stderr
    logs = list((cm.home / "logs").iterdir())
    assert sorted(p.name for p in logs) == ["mcp-h.log", "mcp-h.log.1"]
    assert sum(p.stat().st_size for p in logs) <= 2 * 64 * 1024  # was 48 MiB


# -- 5. tool text in prompts ---------------------------------------------------------------------------


async def test_a_tools_text_is_capped_with_a_warning_naming_server_and_tool(mount):
    cm = mount("big-text")
    skills = {s.name: s for s in cm.skills() if s.origin == "mcp:h"}
    wordy = skills["h-wordy"]
    assert len(wordy.description) == 2000 and len(skill_stub(wordy)) < 3000  # was 10 MB in every request
    (warning,) = wordy.warnings
    assert "MCP server 'h', tool 'wordy': its description has 10,500,000 characters" in warning
    assert "mcp_servers.h.description_chars" in warning
    (long_name,) = [s for name, s in skills.items() if name.startswith("h-naaa")]
    assert len(long_name.name) == 64
    assert "its name is longer than 64 characters" in long_name.warnings[0] and len(long_name.warnings[0]) < 500
    (refused,) = [e for e in cm.errors if "schemer" in str(e)]
    assert "MCP server 'h', tool 'schemer' is not mounted: its schemas take 129 KB" in str(refused)
    assert "mcp_servers.h.schema_kb (64)" in str(refused)
    assert "h-schemer" not in skills and "h-poke" in skills


async def test_the_caps_are_config_keys(mount):
    cm = mount("big-text", description_chars=100, schema_kb=200)
    skills = {s.name: s for s in cm.skills() if s.origin == "mcp:h"}
    assert len(skills["h-wordy"].description) == 100 and "h-schemer" in skills


async def test_a_server_listing_tools_for_ever_gets_max_tools_of_them(mount):
    cm = mount("endless", max_tools=120)
    skills = [s for s in cm.skills() if s.origin == "mcp:h"]
    assert len(skills) == 120
    (warning,) = [w for s in skills for w in s.warnings]
    assert "MCP server 'h' lists more than 120 tools" in warning and "mcp_servers.h.max_tools" in warning


# -- 4. a redirect to another host ---------------------------------------------------------------


class _Recorder(http.server.BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 - stdlib name
        self.server.seen.append(dict(self.headers))  # type: ignore[attr-defined]
        target = getattr(self.server, "target", None)
        self.send_response(307 if target else 404)
        if target:
            self.send_header("Location", target)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST  # noqa: N815

    def log_message(self, *args):
        pass


@pytest.fixture
def servers():
    made = []

    def serve(target=None):
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
        server.seen, server.target = [], target
        threading.Thread(target=server.serve_forever, daemon=True).start()
        made.append(server)
        return server

    yield serve
    for server in made:
        server.shutdown()
        server.server_close()


async def test_a_redirect_to_another_host_is_refused_with_the_token(mount, servers):
    other = servers()
    redirecting = servers(target=f"http://127.0.0.1:{other.server_port}/mcp")
    url = f"http://127.0.0.1:{redirecting.server_port}/mcp"
    cm = mount(url=url, headers={"X-Api-Key": "the-secret"}, startup_timeout=20)
    (error,) = cm.errors
    assert "MCP server 'h' failed to start" in str(error)
    assert f"redirected to http://127.0.0.1:{other.server_port}/mcp, off its own host" in str(error)
    assert redirecting.seen and redirecting.seen[0]["X-Api-Key"] == "the-secret"
    assert other.seen == []  # the key never went there
