"""Our MCP client: servers configured under ``mcp_servers:`` become skills. Tested
against a small real MCP server (helper_server.py, stdio) and against our own server
over loopback HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
import yaml

from agent_apps import Cancelled, ContextManager, Signal, SkillFailed, ToolNotAllowed
from agent_apps.mcp.client import close_servers, skill_name
from agent_apps.mcp.server import serving_http

pytestmark = pytest.mark.anyio

HELPER = Path(__file__).with_name("helper_server.py")


def _manager(tmp_path, skills_path, servers):
    home = tmp_path / "agent-apps-home"
    home.mkdir(exist_ok=True)
    (home / "config.yaml").write_text(yaml.safe_dump({"mcp_servers": servers}))
    return ContextManager(
        search_path=[skills_path], cwd=tmp_path, home=home, env=False, project=False, user=False, entry_points=False
    )


@pytest.fixture
def helper(tmp_path):
    return {
        "command": sys.executable,
        "args": [str(HELPER)],
        "env": {"HELPER_GREETING": "hello from ${HELPER_PREFIX}env", "MARKER": str(tmp_path / "cancelled")},
    }


@pytest.fixture
def manager(tmp_path, skills_path, skills, helper, monkeypatch):
    monkeypatch.setenv("HELPER_PREFIX", "the ")
    cm = _manager(tmp_path, skills_path, {"helper": helper, "Broken Server": {"command": str(tmp_path / "missing")}})
    yield cm
    close_servers(cm)


def test_names_are_normalized():
    assert skill_name("helper", "shoutText") == "helper-shout-text"
    assert skill_name("My Server", "read_file") == "my-server-read-file"


async def test_tools_become_skills_with_their_schemas(manager):
    names = {s.name for s in manager.skills() if s.origin == "mcp:helper"}
    assert names == {"helper-add", "helper-shout-text", "helper-fail", "helper-die", "helper-wait", "helper-greeting"}
    add = manager.describe("helper-add")
    assert add["params"]["required"] == ["a", "b"]
    assert add["returns"] == {"type": "object", "properties": {"sum": {"type": "integer"}}, "required": ["sum"]}
    assert add["description"] == "Add two integers."
    assert await manager.invoke("helper-add", {"a": 2, "b": 3}) == {"sum": 5}
    assert await manager.invoke("helper-shout-text", {"text": "abc"}) == "ABC"
    assert await manager.invoke("helper-greeting") == "hello from the env"
    assert await manager.invoke("word-count", {"text": "other skills work"}) == 3


async def test_a_server_that_fails_to_start_is_a_clear_error_for_its_tools_only(manager):
    errors = [str(e) for e in manager.errors]
    assert len(errors) == 1
    assert "mcp_servers.Broken Server" in errors[0] and "failed to start" in errors[0]
    assert "missing" in errors[0]
    assert not [s for s in manager.skills() if s.origin.startswith("mcp:Broken")]
    assert await manager.invoke("helper-add", {"a": 1, "b": 1}) == {"sum": 2}


async def test_tool_errors_and_invalid_args(manager):
    with pytest.raises(SkillFailed, match="this tool always fails"):
        await manager.invoke("helper-fail")
    with pytest.raises(Exception, match="invalid args"):
        await manager.invoke("helper-add", {"a": "one", "b": 2})


async def test_a_server_that_dies_fails_its_own_tools_then_reconnects(manager):
    with pytest.raises(SkillFailed, match="MCP server 'helper'"):
        await manager.invoke("helper-die")
    assert await manager.invoke("word-count", {"text": "still fine"}) == 2
    assert await manager.invoke("helper-add", {"a": 1, "b": 2}) == {"sum": 3}  # reconnected


async def test_allowed_tools_apply(manager, write_skill):
    write_skill(
        "adder",
        """
        frontmatter = {"description": "Uses MCP tools.", "allowed-tools": "helper-add",
                       "params": {"type": "object", "properties": {"tool": {"type": "string"}}}}
        async def main(ctx, args):
            call = {"a": 1, "b": 2} if args["tool"] == "helper-add" else {"text": "x"}
            return await ctx.manager.invoke(args["tool"], call)
        """,
    )
    manager.reload()
    assert await manager.invoke("adder", {"tool": "helper-add"}) == {"sum": 3}
    with pytest.raises(ToolNotAllowed, match="helper-shout-text"):
        await manager.invoke("adder", {"tool": "helper-shout-text"})


async def test_cancelling_a_call_cancels_it_on_the_server(manager, tmp_path):
    signal = Signal()
    async with anyio.create_task_group() as tg:

        async def call():
            with pytest.raises(Cancelled):
                await manager.invoke("helper-wait", signal=signal)

        tg.start_soon(call)
        started = tmp_path / "cancelled.started"
        for _ in range(3000):
            if started.exists():
                break
            await anyio.sleep(0.01)
        assert started.exists()
        signal.cancel("stop")
    marker = tmp_path / "cancelled"
    for _ in range(500):
        if marker.exists():
            break
        await anyio.sleep(0.01)
    assert marker.read_text() == "cancelled"


async def test_http_server_with_headers(tmp_path, skills_path, skills, monkeypatch):
    served = ContextManager(
        search_path=[skills_path], cwd=tmp_path, env=False, project=False, user=False, entry_points=False
    )
    monkeypatch.setenv("REMOTE_TOKEN", "t0ken")
    async with serving_http(served, watch=False, token="t0ken") as url:
        other = tmp_path / "other"
        other.mkdir()
        cm = _manager(
            other, skills_path, {"remote": {"url": url, "headers": {"Authorization": "Bearer ${REMOTE_TOKEN}"}}}
        )
        try:
            skills = {s.name: s for s in await anyio.to_thread.run_sync(cm.skills)}
            assert "remote-word-count" in skills and "remote-stats" in skills
            assert skills["remote-stats"].returns["properties"] == {"words": {"type": "integer"}}
            assert await cm.invoke("remote-stats", {"text": "a b"}) == {"words": 2}
            assert skills["remote-word-count"].returns == {"type": "integer"}
            assert await cm.invoke("remote-word-count", {"text": "a b c"}) == 3  # unwrapped again
        finally:
            close_servers(cm)


def test_cli_list_shows_mcp_tools_and_the_broken_server(tmp_path, skills_path, skills, helper):
    home = Path(os.environ["AGENT_APPS_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(
        yaml.safe_dump({"mcp_servers": {"helper": helper, "gone": {"command": str(tmp_path / "nope")}}})
    )
    result = subprocess.run(
        [sys.executable, "-m", "agent_apps", "list", "--json", "--path", str(skills_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1, result.stderr  # the listing is incomplete: a server failed
    data = json.loads(result.stdout)
    names = {s["name"] for s in data["skills"]}
    assert {"helper-add", "word-count"} <= names
    assert any("mcp_servers.gone" in e and "failed to start" in e for e in data["errors"])
    assert "mcp_servers.gone" in result.stderr


def test_mounting_agent_apps_itself_does_not_loop(tmp_path, skills_path, skills):
    """A user config that mounts `agent-apps mcp` is read by that child too; the child
    must not mount it again (it would start copies of itself forever)."""
    home = Path(os.environ["AGENT_APPS_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    server = {"command": sys.executable, "args": ["-m", "agent_apps", "mcp", "--path", str(skills_path)]}
    (home / "config.yaml").write_text(yaml.safe_dump({"mcp_servers": {"self": server}}))
    result = subprocess.run(
        [sys.executable, "-m", "agent_apps", "list", "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    names = {s["name"] for s in json.loads(result.stdout)["skills"]}
    assert "self-word-count" in names
    assert not any(name.startswith("self-self-") for name in names)
