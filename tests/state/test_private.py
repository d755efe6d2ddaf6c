"""What agent-apps writes for the user is private to the user: the state store (its
folder 0700; state.db, -wal and -shm 0600, whatever the umask; a wider one tightened
when opened), the logs of mounted MCP servers and the audit log."""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from agent_apps import ContextManager
from agent_apps.state import StateStore

pytestmark = pytest.mark.anyio

SCRIPTED = {"agent": "agent-scripted", "script": [{"text": "Hello."}]}


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture(params=[0o022, 0o002, 0o000])
def umask(request):
    old = os.umask(request.param)
    yield request.param
    os.umask(old)


def store_files(path: Path) -> dict[str, int]:
    return {p.name: mode(p) for p in path.parent.iterdir() if p.name.startswith(path.name)}


async def test_a_new_store_in_a_new_home_is_private_whatever_the_umask(tmp_path, umask):
    home = Path(os.environ["AGENT_APPS_HOME"])  # the hermetic home: not made yet
    assert not home.exists()
    cm = ContextManager(search_path=[], cwd=tmp_path, env=False, project=False, entry_points=False)
    await cm.invoke("agent", {"prompt": "P", "user_message": "Hi.", "config": SCRIPTED}, session="s1")
    assert mode(home) == 0o700
    files = store_files(home / "state.db")  # the connection is open: -wal and -shm are there
    assert files == {"state.db": 0o600, "state.db-wal": 0o600, "state.db-shm": 0o600}


def test_every_folder_the_store_makes_is_private(tmp_path, umask):
    store = StateStore(tmp_path / "a" / "b" / "state.db")
    store.sessions.list()
    assert mode(tmp_path / "a") == mode(tmp_path / "a" / "b") == 0o700
    assert set(store_files(tmp_path / "a" / "b" / "state.db").values()) == {0o600}


def test_a_world_readable_store_is_tightened_when_opened(tmp_path):
    home = Path(os.environ["AGENT_APPS_HOME"])
    home.mkdir(mode=0o755)
    os.chmod(home, 0o755)
    old = os.umask(0o022)
    try:  # a store as older versions left it: 0755 and 0644
        StateStore(home / "state.db").sessions.list()
        conn = sqlite3.connect(home / "state.db")  # keeps -wal and -shm
        conn.execute("SELECT 1").fetchone()
        for name in ("state.db", "state.db-wal", "state.db-shm"):
            os.chmod(home / name, 0o644)
        assert mode(home / "state.db-wal") == 0o644
        StateStore(home / "state.db").sessions.list()
        conn.close()
    finally:
        os.umask(old)
    assert mode(home) == 0o700
    assert set(store_files(home / "state.db").values()) == {0o600}


def test_a_folder_that_is_not_agent_apps_own_keeps_its_mode_but_the_files_do_not(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o755)
    project = tmp_path / "project" / ".agent-apps"  # a project's own store folder is ours
    project.mkdir(parents=True)
    os.chmod(project, 0o755)
    for folder in (shared, project):
        StateStore(folder / "state.db").sessions.list()
        assert set(store_files(folder / "state.db").values()) == {0o600}
    assert mode(shared) == 0o755 and mode(project) == 0o700


def test_the_command_line_makes_a_private_store(tmp_path):
    home = tmp_path / "cli-home"
    env = {**os.environ, "AGENT_APPS_HOME": str(home)}
    done = subprocess.run(
        [sys.executable, "-c", "import os, sys; os.umask(0o022); from agent_apps.cli import main; sys.exit(main())",
         "sessions", "list"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert mode(home) == 0o700 and mode(home / "state.db") == 0o600


def test_mounted_mcp_server_logs_are_private(tmp_path, umask):
    from agent_apps.mcp.client import ServerConnection

    logs = tmp_path / "home" / "logs"
    connection = ServerConnection("noisy", {"command": "true"}, log_dir=logs)
    assert connection.log is not None
    connection.log.start("true")
    connection.log.close()
    assert mode(tmp_path / "home") == mode(logs) == 0o700
    assert mode(logs / "mcp-noisy.log") == 0o600
    os.chmod(logs / "mcp-noisy.log", 0o644)  # left wider by an older version
    connection.log.start("true")
    connection.log.close()
    assert mode(logs / "mcp-noisy.log") == 0o600


async def test_the_default_audit_log_is_private(tmp_path, write_skill, skills_path, umask):
    write_skill("hello", "frontmatter = {}\nasync def main(ctx, args):\n    return 1\n")
    project = tmp_path / "project"
    project.mkdir()
    (project / "agent-apps.yaml").write_text("middleware: [audit]\n")
    cm = ContextManager([skills_path], cwd=project, home=project / "home", env=False, user=False, entry_points=False)
    await cm.invoke("hello")
    assert mode(project / "home") == 0o700 and mode(project / "home" / "audit.jsonl") == 0o600
