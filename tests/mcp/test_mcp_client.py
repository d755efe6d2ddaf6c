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
from agent_apps.mcp.client import close_servers
from agent_apps.mcp.transports import serving_http

pytestmark = pytest.mark.anyio

HERE = Path(__file__).parent
HELPER = HERE / "helper_server.py"


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


def test_cli_list_shows_mcp_tools_and_the_broken_server(tmp_path, skills_path, skills, helper, monkeypatch):
    monkeypatch.setenv("HELPER_PREFIX", "the ")
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


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie waiting to be reaped is not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def _cli(args, cwd, timeout=120):
    return subprocess.run(
        [sys.executable, "-m", "agent_apps", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


def test_a_server_that_misses_startup_timeout_does_not_outlive_agent_apps(tmp_path):
    """The server runs in a session of its own (out of reach of the terminal's Ctrl-C);
    exiting must stop it, even when it never answered and ignores its closed stdin."""
    pid_file = tmp_path / "silent.pid"
    server = {"command": sys.executable, "args": [str(HERE / "silent_server.py"), str(pid_file)], "startup_timeout": 1}
    home = Path(os.environ["AGENT_APPS_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(yaml.safe_dump({"mcp_servers": {"silent": server}}))
    result = _cli(["list"], tmp_path)
    assert result.returncode == 1, result.stderr  # a server that failed to start is a load error
    assert "MCP server 'silent' failed to start: no answer within 1 s (startup_timeout)" in result.stderr
    pid = int(pid_file.read_text())
    assert not _alive(pid), f"the mounted server (pid {pid}) outlived agent-apps"


def test_mounted_tools_never_shadow_skills_or_collapse_into_one_name(tmp_path, skills_path, skills, helper):
    helper["env"]["HELPER_EXTRA_TOOLS"] = "read,read_file,readFile,word_count"
    del helper["env"]["HELPER_GREETING"]
    cm = _manager(tmp_path, skills_path, {"file": helper})
    try:
        # the bundled file-read and the user's word-count keep their names
        assert cm.get("file-read").origin == "bundled"
        warnings = "\n".join(cm.catalog.warnings)
        assert "(mcp_servers.file): MCP server 'file': tool 'read' is not mounted as 'file-read', which " in warnings
        assert "file-read.skill.py" in warnings  # names the skill that has the name
        # two tools that normalize alike keep two names
        assert cm.invoke_sync("file-read-file") == "read_file"
        assert cm.invoke_sync("file-read-file-2") == "readFile"
        assert "tools 'read_file' and 'readFile' both become 'file-read-file'" in warnings
        shadowed = [e for e in cm.catalog.entries if e.skill.name == "file-read" and e.shadowed_by is not None]
        assert [e.skill.origin for e in shadowed] == ["mcp:file"]
    finally:
        close_servers(cm)


def test_a_user_skill_keeps_its_name_against_a_mounted_tool(tmp_path, skills_path, skills, helper):
    helper["env"]["HELPER_EXTRA_TOOLS"] = "count"
    del helper["env"]["HELPER_GREETING"]
    (skills_path / "word-count.skill.py").rename(skills_path / "words-count.skill.py")
    cm = _manager(tmp_path, skills_path, {"words": helper})
    try:
        assert cm.get("words-count").origin == "path"
        assert any("tool 'count' is not mounted as 'words-count'" in w for w in cm.catalog.warnings)
    finally:
        close_servers(cm)


def test_an_unset_variable_is_an_error_naming_it_and_the_server(tmp_path, skills_path, skills, helper, monkeypatch):
    monkeypatch.delenv("HELPER_PREFIX", raising=False)
    monkeypatch.delenv("NO_SUCH_TOKEN", raising=False)
    monkeypatch.setenv("EMPTY_ONE", "")
    remote = {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer ${NO_SUCH_TOKEN}"}}
    helper["env"]["HELPER_GREETING"] = "${EMPTY_ONE:-fallback} ${HELPER_PREFIX:-}"
    cm = _manager(tmp_path, skills_path, {"remote": remote, "stdio": {**helper, "args": [str(HELPER), "${NOPE}"]}})
    try:
        errors = sorted(str(e) for e in cm.errors)
        assert len(errors) == 2
        assert "MCP server 'remote': environment variable NO_SUCH_TOKEN is not set" in errors[0]
        assert "headers.Authorization" in errors[0] and "mcp_servers.remote" in errors[0]
        assert "MCP server 'stdio': environment variable NOPE is not set (${NOPE} in args[1])" in errors[1]
        helper["args"] = [str(HELPER)]
        cm2 = _manager(tmp_path, skills_path, {"ok": helper})
        try:
            assert cm2.invoke_sync("ok-greeting") == "fallback "  # defaults: empty counts as unset
        finally:
            close_servers(cm2)
    finally:
        close_servers(cm)


def test_server_stderr_goes_to_a_log_file_unless_debug(tmp_path, skills_path, skills, helper, monkeypatch):
    monkeypatch.setenv("HELPER_PREFIX", "the ")
    helper["env"]["HELPER_STDERR_LINES"] = "97"
    home = Path(os.environ["AGENT_APPS_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(yaml.safe_dump({"mcp_servers": {"noisy": helper}}))
    quiet = _cli(["list", "--path", str(skills_path)], tmp_path)
    assert quiet.returncode == 0, quiet.stderr
    assert "noisy-add" in quiet.stdout and "noisy line" not in quiet.stderr
    log = (home / "logs" / "mcp-noisy.log").read_text()
    assert log.count("helper server: noisy line") == 97
    loud = _cli(["list", "--debug", "--path", str(skills_path)], tmp_path)
    assert loud.stderr.count("helper server: noisy line") == 97


def test_a_failed_start_names_the_servers_last_words(tmp_path, skills_path):
    script = tmp_path / "crash.py"
    script.write_text("import sys\nsys.stderr.write('crash: cannot open the database\\n')\nsys.exit(2)\n")
    cm = _manager(tmp_path, skills_path, {"crash": {"command": sys.executable, "args": [str(script)]}})
    try:
        (error,) = cm.errors
        assert "MCP server 'crash' failed to start" in str(error)
        assert "its stderr ends: 'crash: cannot open the database'" in str(error)
        assert "mcp-crash.log" in str(error)
    finally:
        close_servers(cm)
