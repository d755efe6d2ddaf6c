"""``agent-apps doctor``: each check, what it says to fix, and its exit status."""

from __future__ import annotations

import json

from agent_apps.cli import main


def doctor(capsys, *argv):
    code = main(["doctor", "--json", *argv])
    return code, {check["name"]: check for check in json.loads(capsys.readouterr().out)}


def test_a_working_set_up_and_a_broken_one(capsys, tmp_path, monkeypatch, write_skill, skills_path):
    monkeypatch.setenv("AGENT_APPS_STATE", str(tmp_path / "state.db"))
    (tmp_path / "agent-apps.yaml").write_text("model:\n  agent: agent-scripted\n")
    monkeypatch.chdir(tmp_path)
    code, checks = doctor(capsys)
    assert code == 0, checks
    assert [checks[n]["status"] for n in ("state store", "config", "skills", "provider")] == ["ok"] * 4
    assert checks["provider"]["message"].startswith("agent-scripted: the offline scripted model")
    assert checks["config"]["message"] == f"files: {tmp_path / 'agent-apps.yaml'}"
    # broken: a config key of the wrong type, a skill file that does not load
    (tmp_path / "agent-apps.yaml").write_text("model:\n  max_turns: many\n")
    write_skill("broken", "frontmatter = {\n")
    code, checks = doctor(capsys, "--path", str(skills_path))
    assert code == 1
    assert checks["config"]["status"] == "error"
    assert "agent-apps.yaml:2: model.max_turns must be" in checks["config"]["message"]
    assert checks["skills"]["status"] == "error" and "agent-apps list" in checks["skills"]["fix"]
    assert main(["doctor", "--path", str(skills_path)]) == 1
    out, err = capsys.readouterr()
    assert "  error    config" in out and "fix: correct that file" in out and err.startswith("error: config, skills")


def test_a_provider_chosen_without_what_it_needs_is_broken(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("AGENT_APPS_STATE", str(tmp_path / "state.db"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    (tmp_path / "agent-apps.yaml").write_text("model:\n  agent: agent-strands\n  provider: anthropic\n")
    code, checks = doctor(capsys)
    assert code == 1 and checks["provider"] == {
        "name": "provider", "status": "error", "message": "agent-strands (anthropic): no ANTHROPIC_API_KEY",
        "fix": "export ANTHROPIC_API_KEY=...",
    }
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    assert doctor(capsys)[1]["provider"]["status"] == "ok"
    (tmp_path / "agent-apps.yaml").write_text("model:\n  agent: agent-acp\n  command: no-such-agent-cli --acp\n")
    code, checks = doctor(capsys)
    assert code == 1 and "'no-such-agent-cli' is not on PATH" in checks["provider"]["message"]


def test_a_sandbox_not_built_yet_is_a_warning_and_a_damaged_one_an_error(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("AGENT_APPS_STATE", str(tmp_path / "state.db"))
    monkeypatch.setenv("AGENT_APPS_CACHE_DIR", str(tmp_path / "cache"))
    code, checks = doctor(capsys)
    assert checks["sandbox"]["status"] == "warning" and checks["sandbox"]["fix"].startswith("agent-apps sandbox build")
    from agent_apps.sandbox._build import artifact_path

    artifact_path().parent.mkdir(parents=True)
    artifact_path().write_bytes(b"not a component")
    code, checks = doctor(capsys)
    assert code == 1 and checks["sandbox"]["status"] == "error"
    assert checks["sandbox"]["fix"] == "agent-apps sandbox build --force"
