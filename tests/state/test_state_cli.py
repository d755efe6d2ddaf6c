"""``agent-apps sessions ...``, ``agent-apps runs ...`` and ``invoke --session``."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from agent_apps.cli import main
from agent_apps.config import agent_apps_home
from agent_apps.state import StateStore

SKILL = """
---
description: Counts its runs.
metadata:
  model:
    agent: agent-scripted
    script:
      - text: "Counting."
        code: "memory['n'] = memory.get('n', 0) + 1\\nprint(memory['n'])"
      - text: "Counted."
---
Count.
"""


@pytest.fixture
def skills(tmp_path):
    folder = tmp_path / "skills"
    folder.mkdir()
    (folder / "counter.skill.md").write_text(textwrap.dedent(SKILL).lstrip())
    return folder


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_invoke_with_a_session_then_list_show_export_import_fork_rm(
    capsys, skills, tmp_path, state_location, monkeypatch
):
    monkeypatch.setenv("AGENT_APPS_STATE", state_location)
    for task in ("one", "two"):
        code, out, _ = run(capsys, "invoke", "counter", "--path", skills, "--session", "s1", f"task={task}")
        assert code == 0 and out.strip() == "Counted."
    code, out, _ = run(capsys, "sessions", "list")
    assert code == 0 and out.splitlines()[0].split() == ["ID", "MESSAGES", "TOKENS", "UPDATED"]
    assert out.splitlines()[1].split()[:2] == ["s1", "8"]
    code, out, _ = run(capsys, "sessions", "show", "s1")
    assert code == 0 and "#1 user: one" in out and "#5 user: two" in out and '"n": 2' in out
    code, out, _ = run(capsys, "sessions", "export", "s1")
    exported = json.loads(out)
    assert exported["format"] == "agent-apps/session" and len(exported["messages"]) == 8
    snapshot = tmp_path / "s1.json"
    snapshot.write_text(out)
    code, _, err = run(capsys, "sessions", "import", snapshot)
    assert code == 2 and "session 's1' already exists" in err and "--as" in err
    code, out, _ = run(capsys, "sessions", "import", snapshot, "--as", "s2")
    assert code == 0 and "imported session s2 (8 messages)" in out
    code, out, _ = run(capsys, "sessions", "export", "s2")
    assert {**json.loads(out), "id": "s1"} == exported
    code, out, _ = run(capsys, "sessions", "fork", "s2", "s3")
    assert code == 0 and "as s3" in out
    code, out, _ = run(capsys, "sessions", "list", "--json")
    assert sorted(s["id"] for s in json.loads(out)) == ["s1", "s2", "s3"]
    code, out, _ = run(capsys, "sessions", "rm", "s3")
    assert code == 0
    code, _, err = run(capsys, "sessions", "show", "s3")
    assert code == 2 and err.strip() == "error: no session 's3' (agent-apps sessions list shows the sessions)"


def test_runs_list_and_show(capsys, skills, state_location, monkeypatch):
    monkeypatch.setenv("AGENT_APPS_STATE", state_location)
    run(capsys, "invoke", "counter", "--path", skills, "--session", "s1", "task=x")
    run(capsys, "invoke", "counter", "--path", skills, "task=y")
    code, out, err = run(capsys, "runs", "list")
    lines = out.splitlines()
    assert code == 0, err
    assert code == 0 and lines[0].split()[:4] == ["RUN", "STARTED", "STATUS", "NAME"] and len(lines) == 3
    code, out, _ = run(capsys, "runs", "list", "--session", "s1", "--json")
    (listed,) = json.loads(out)
    assert listed["session_id"] == "s1" and listed["status"] == "done"
    code, out, _ = run(capsys, "runs", "show", listed["id"][:8])
    assert code == 0 and out.startswith(f"run {listed['id']}: done")
    assert "\nagent counter [" in out and "\n  turn 1 · model " in out and "    text: Counting.\n" in out
    assert "      │ memory['n'] = memory.get('n', 0) + 1\n" in out and "      result: 1\n" in out
    assert "trace: " in out
    code, out, _ = run(capsys, "runs", "show", listed["id"], "--json")
    data = json.loads(out)
    (agent,) = data["agents"]
    assert agent["report"]["steps"][0]["tool_calls"][0]["result_size"] == 1 and agent["trace"]
    code, _, err = run(capsys, "runs", "show", "ffffffff")
    assert code == 2 and "no run 'ffffffff'" in err


SHOWN = """
---
description: Calls skills.
metadata:
  model:
    agent: agent-scripted
    model_id: eu.claude-haiku-4-5
    script:
      - text: "Reading.\\x1b[2J"
        reasoning: "First list, then read."
        usage: {input_tokens: 1000, output_tokens: 50}
        code: |
          names = await ctx.manager.invoke('file-list', {'path': '.'})
          try:
              await ctx.manager.invoke('file-read', {'path': '/etc/' + 'x' * 200})
          except Exception as exc:
              print('refused')
          print(len(names))
      - text: "Done."
        usage: {input_tokens: 2000, output_tokens: 5}
---
Read.
"""


def test_runs_show_tells_what_happened_cut_to_the_terminal_width(capsys, tmp_path, monkeypatch):
    folder = tmp_path / "shown"
    folder.mkdir()
    (folder / "reader.skill.md").write_text(textwrap.dedent(SHOWN).lstrip())
    code, out, err = run(capsys, "invoke", "reader", "--path", folder)
    assert code == 0, err
    (listed,) = json.loads(run(capsys, "runs", "list", "--json")[1])
    monkeypatch.setenv("COLUMNS", "76")
    code, out, _ = run(capsys, "runs", "show", listed["id"])
    assert code == 0 and max(len(line) for line in out.splitlines()) == 76
    lines = out.splitlines()
    assert lines[1].startswith("  reader · no session · started ")  # facts wrap between facts
    assert " · took " in lines[1] and lines[2] == "    3,000 in / 55 out tokens · $0.0033"
    assert "agent-scripted · eu.claude-haiku-4-5" in out
    turn = next(i for i, line in enumerate(lines) if line.startswith("  turn 1 · model "))
    more = lines[turn + 1].strip()
    facts = lines[turn] if more.startswith("reasoning:") else f"{lines[turn]} · {more}"
    assert facts.endswith(" · 1,000 in / 50 out tokens · $0.0013 · tool_use")
    assert "    reasoning: First list, then read." in lines and "    text: Reading.\\x1b[2J" in lines
    assert "\x1b" not in out  # what the model wrote cannot steer the terminal
    assert "      │ names = await ctx.manager.invoke('file-list', {'path': '.'})" in lines
    listing = next(i for i, line in enumerate(lines) if line.startswith("      → file-list "))
    assert lines[listing].endswith(" ms") and lines[listing + 1] == '          args {"path": "."}'
    assert lines[listing + 2].startswith('          = {"path": ') and lines[listing + 2].endswith("…")
    refused = next(i for i, line in enumerate(lines) if line.startswith("      → file-read · "))
    assert lines[refused + 1].startswith('          args {"path": "/etc/xxxxx') and lines[refused + 1].endswith("…")
    assert lines[refused + 2].startswith("          ✗ PermissionDenied: file-read: permission denied")
    assert "      result:" in lines and "  result: Done." in lines
    code, out, _ = run(capsys, "runs", "show", listed["id"], "--json")
    (agent,) = json.loads(out)["agents"]
    (call,) = agent["report"]["steps"][0]["tool_calls"]
    assert call["host_calls"][1]["args"] == {"path": "/etc/" + "x" * 200}  # --json has all of it


SLOW = """
---
description: Waits.
metadata:
  model:
    agent: agent-scripted
    script:
      - code: |
          import asyncio
          await asyncio.sleep(60)
      - text: "Done."
---
Wait.
"""


def test_a_cancelled_agent_shows_the_reason_it_was_cancelled(capsys, skills):
    """Before: ``runs show`` printed an empty ``error: CancelledError:`` for an agent whose
    run timed out."""
    (skills / "slow.skill.md").write_text(textwrap.dedent(SLOW).lstrip())
    code, _, err = run(capsys, "invoke", "slow", "--path", skills, "--timeout", "1")
    assert code == 1 and "timed out after 1 s" in err
    code, out, _ = run(capsys, "runs", "list", "--json")
    (listed,) = json.loads(out)
    code, out, _ = run(capsys, "runs", "show", listed["id"], "--json")
    assert json.loads(out)["agents"][0]["report"]["error"] == {"type": "Cancelled", "message": "timed out after 1 s"}
    code, out, _ = run(capsys, "runs", "show", listed["id"])
    assert "\n  error: Cancelled: timed out after 1 s\n" in out


@pytest.mark.parametrize("limit", ["-3", "x", "1.5"])
def test_runs_list_refuses_a_limit_that_is_not_a_count(capsys, limit):
    with pytest.raises(SystemExit) as info:
        main(["runs", "list", "--limit", limit])
    assert info.value.code == 2 and capsys.readouterr().err.splitlines()[-1].startswith("error: argument --limit: ")


def test_prune_runs_and_sessions_by_age(capsys, skills, tmp_path):
    for session in ("old", "new"):
        run(capsys, "invoke", "counter", "--path", skills, "--session", session, "task=x")
    store = StateStore(os.environ.get("AGENT_APPS_STATE") or agent_apps_home() / "state.db")
    with store.db.write() as conn:  # the "old" session and its run, 40 days back
        conn.execute("UPDATE sessions SET updated_at = updated_at - 40 * 86400 WHERE id = 'old'")
        conn.execute("UPDATE runs SET started_at = started_at - 40 * 86400, ended_at = ended_at - 40 * 86400 "
                     "WHERE id IN (SELECT run_id FROM agents WHERE session_id = 'old')")
    code, out, err = run(capsys, "runs", "prune", "--older-than", "30d", "--dry-run")
    assert code == 0 and err == "would remove 1 run older than 30d\n" and "counter" in out
    assert len(store.runs.list()) == 2
    code, out, err = run(capsys, "runs", "prune", "--older-than", "30d")
    assert code == 0 and err == "removed 1 run older than 30d\n"
    assert [r.id for r in store.runs.list()] == [r.id for r in store.runs.list(session="new")]
    code, out, err = run(capsys, "sessions", "prune", "--older-than", "4w")
    assert code == 0 and out.splitlines()[1].split()[0] == "old" and err == "removed 1 session older than 4w\n"
    assert [s.id for s in store.sessions.list()] == ["new"]
    assert run(capsys, "runs", "prune", "--older-than", "30d")[2] == "removed 0 runs older than 30d\n"
    with pytest.raises(SystemExit):
        main(["runs", "prune", "--older-than", "soon"])
    assert "a number and a unit (s, m, h, d, w), like 30d, not 'soon'" in capsys.readouterr().err


def test_a_run_whose_process_died_is_interrupted_everywhere_alike(capsys, skills):
    import subprocess
    import sys

    run(capsys, "invoke", "counter", "--path", skills, "--session", "s1", "task=x")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # a real process that has ended: its pid is free
    store = StateStore(os.environ.get("AGENT_APPS_STATE") or agent_apps_home() / "state.db")
    (info,) = store.runs.list()
    with store.db.write() as conn:  # as a run killed mid-way leaves its rows
        conn.execute("UPDATE runs SET status = 'running', ended_at = NULL, pid = ? WHERE id = ?", (dead.pid, info.id))
        conn.execute("UPDATE agents SET status = 'running' WHERE run_id = ?", (info.id,))
    code, out, _ = run(capsys, "runs", "list")
    assert out.splitlines()[1].split()[3] == "interrupted"  # RUN, STARTED (date, time), STATUS
    code, out, _ = run(capsys, "runs", "list", "--json")
    (listed,) = json.loads(out)
    assert listed["status"] == "interrupted" and "process_gone" not in listed
    code, out, _ = run(capsys, "runs", "show", info.id)
    assert out.startswith(f"run {info.id}: interrupted") and "agent-apps resume" in out
    (agent,) = store.runs.agents(info.id)
    assert f"agent counter [{agent.id}] interrupted" in out and "its process died" in out
    code, out, _ = run(capsys, "runs", "show", info.id, "--json")
    shown = json.loads(out)
    assert shown["status"] == "interrupted" and shown["agents"][0]["status"] == "interrupted"
    assert "process_gone" not in shown
    assert store.runs.get(info.id).status == "interrupted"  # the Python API
    assert [r.status for r in store.runs.list(session="s1")] == ["interrupted"]
    code, out, _ = run(capsys, "runs", "export", info.id)
    assert json.loads(out)["run"]["status"] == "interrupted"


def test_bad_export_files_name_the_file_line_and_field(capsys, tmp_path):
    bad = tmp_path / "bad.json"
    lines = ["{", '  "format": "agent-apps/session",', '  "version": 1,', '  "id": "x",', '  "messages": [']
    bad.write_text("\n".join([*lines, '    {"seq": 1, "role": "bot"}', "  ]", "}", ""]))
    code, _, err = run(capsys, "sessions", "import", bad)
    assert code == 2 and err.startswith(f"error: {bad}:6: messages[0].role: 'bot' is not one of")
    bad.write_text("{\n  oops\n}")
    code, _, err = run(capsys, "sessions", "import", bad)
    assert code == 2 and f"{bad}:2: not valid JSON" in err
    code, _, err = run(capsys, "sessions", "import", tmp_path / "missing.json")
    assert code == 2 and "missing.json: cannot read it" in err


def test_bad_session_id_on_the_command_line(capsys, skills):
    code, _, err = run(capsys, "invoke", "counter", "--path", skills, "--session", "no spaces")
    assert code == 2 and "--session: bad session id 'no spaces'" in err


def test_a_damaged_store_is_one_clear_line(capsys):
    path = Path(agent_apps_home()) / "state.db"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"not sqlite at all " * 100)
    code, _, err = run(capsys, "sessions", "list")
    assert (
        code == 1 and err.startswith(f"error: state store {path}: the file is damaged") and len(err.splitlines()) == 1
    )


def test_the_state_env_variable_points_elsewhere(capsys, state_location, monkeypatch):
    target = state_location
    monkeypatch.setenv("AGENT_APPS_STATE", target)
    StateStore(target).sessions.append("far", [{"role": "user", "text": "hi"}])
    code, out, _ = run(capsys, "sessions", "list", "--json")
    assert [s["id"] for s in json.loads(out)] == ["far"]
    assert not os.path.exists(Path(agent_apps_home()) / "state.db")


def test_a_read_only_run_sees_the_session_and_writes_nothing_to_it(capsys, skills, state_location, monkeypatch):
    monkeypatch.setenv("AGENT_APPS_STATE", state_location)
    code, out, err = run(capsys, "invoke", "counter", "--path", skills, "--session", "s1", "task=one")
    assert code == 0 and "→ 1" in err
    exported = run(capsys, "sessions", "export", "s1")[1]
    code, out, err = run(capsys, "invoke", "counter", "--path", skills, "--session", "s1", "--read-only", "task=two")
    assert code == 0 and out.strip() == "Counted." and "→ 2" in err  # it saw the session's memory
    assert run(capsys, "sessions", "export", "s1")[1] == exported  # and changed nothing of it
    code, out, _ = run(capsys, "runs", "list", "--session", "s1", "--json")
    (off, on) = json.loads(out)
    code, out, _ = run(capsys, "runs", "show", off["id"], "--json")
    assert json.loads(out)["agents"][0]["report"]["read_only"] is True
    code, out, _ = run(capsys, "runs", "show", on["id"], "--json")
    assert "read_only" not in json.loads(out)["agents"][0]["report"]
    # a session that does not exist is not made by a read-only run
    code, _, err = run(capsys, "invoke", "counter", "--path", skills, "--session", "s9", "--read-only", "task=x")
    assert code == 2 and "--session s9: no such session, and a read-only run makes none" in err
    assert [s["id"] for s in json.loads(run(capsys, "sessions", "list", "--json")[1])] == ["s1"]
    code, _, err = run(capsys, "invoke", "counter", "--path", skills, "--read-only", "task=x")
    assert code == 2 and err.strip() == "error: --read-only applies to a session: give --session ID too"


def test_reset_guidance_on_the_command_line(capsys, skills, state_location, monkeypatch):
    monkeypatch.setenv("AGENT_APPS_STATE", state_location)
    run(capsys, "invoke", "counter", "--path", skills, "--session", "s1", "task=one")
    StateStore(state_location).sessions.update_meta("s1", {"loaded_skills": ["code-review"]})
    assert "loaded guidance: code-review" in run(capsys, "sessions", "show", "s1")[1]
    code, out, _ = run(capsys, "sessions", "reset-guidance", "s1")
    assert code == 0 and out.strip() == (
        "session s1: forgot the guidance it loaded (code-review); its messages and memory stay"
    )
    code, out, _ = run(capsys, "sessions", "show", "s1")
    assert "loaded guidance" not in out and "#1 user: one" in out and '"n": 1' in out
    code, out, _ = run(capsys, "sessions", "reset-guidance", "s1")
    assert code == 0 and out.strip() == "session s1: no loaded guidance to forget"
    code, _, err = run(capsys, "sessions", "reset-guidance", "s9")
    assert code == 2 and "no session 's9'" in err
