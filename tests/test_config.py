"""The config cascade and where each value came from."""

from __future__ import annotations

import pytest

from agent_apps import ConfigError, ContextManager


def user_config(tmp_path, monkeypatch, text):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("AGENT_APPS_HOME", str(home))
    (home / "config.yaml").write_text(text)


def make(tmp_path, skills):
    return ContextManager([skills], cwd=tmp_path / "project", env=False, project=True, user=False, entry_points=False)


def test_layers_in_order_with_sources(tmp_path, monkeypatch):
    user_config(tmp_path, monkeypatch, "model:\n  model_id: user-model\n  temperature: 0.1\n  region: us-east-1\n")
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text('[tool.agent-apps.model]\nmodel_id = "project-model"\n')
    skills = tmp_path / "skills"
    sub = skills / "team"
    sub.mkdir(parents=True)
    (skills / "agent-apps.yaml").write_text("model:\n  temperature: 0.5\n  max_turns: 5\n")
    (sub / "agent-apps.yaml").write_text("model:\n  max_turns: 7\n")
    (sub / "writer.skill.py").write_text(
        'frontmatter = {"metadata": {"model": {"max_tokens": 100, "max_turns": 9}}}\nasync def main(ctx, args):\n    return ctx.manager.config({"model": {"max_tokens": 5}})\n'
    )
    cm = make(tmp_path, skills)
    resolved = cm.config_for("writer", {"model": {"region": "eu-west-1"}})
    model = resolved.values["model"]
    assert model["agent"] == "agent-strands" and resolved.sources["model.agent"] == "defaults"
    assert model["model_id"] == "project-model"
    assert resolved.sources["model.model_id"].endswith("pyproject.toml [tool.agent-apps]")
    assert model["temperature"] == 0.5 and resolved.sources["model.temperature"] == str(skills / "agent-apps.yaml")
    assert model["max_turns"] == 9 and "writer metadata" in resolved.sources["model.max_turns"]
    assert model["region"] == "eu-west-1" and resolved.sources["model.region"] == "call"
    assert resolved.get("model.sandbox.timeout") == 30
    assert cm.invoke_sync("writer")["model"]["max_tokens"] == 5


def test_project_yaml_wins_over_pyproject_in_the_same_directory(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "agent-apps.yaml").write_text("model: {model_id: from-yaml}\n")
    (project / "pyproject.toml").write_text('[tool.agent-apps.model]\nmodel_id = "from-toml"\n')
    cm = make(tmp_path, tmp_path / "none")
    assert cm.config_for(None).values["model"]["model_id"] == "from-yaml"


def test_middleware_lists_concatenate(tmp_path, monkeypatch):
    user_config(tmp_path, monkeypatch, "middleware: [audit]\n")
    project = tmp_path / "project"
    project.mkdir()
    (project / "agent-apps.yaml").write_text("middleware: [timing]\n")
    cm = ContextManager([], cwd=project, env=False, user=False, entry_points=False)
    resolved = cm.config_for(None)
    assert resolved.values["middleware"] == ["$agent", "audit", "timing"]  # "$agent": the bundled default
    assert " + " in resolved.sources["middleware"]


def test_bad_config_file_is_a_clear_error(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "agent-apps.yaml").write_text("model:\n  x: [1\n")
    cm = make(tmp_path, tmp_path / "none")
    with pytest.raises(ConfigError) as info:
        cm.config_for(None)
    assert str(info.value).startswith(f"{project / 'agent-apps.yaml'}:")
    (project / "agent-apps.yaml").write_text("- just a list\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        cm.config_for(None)


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("middleware: timing\n", 1, "middleware must be a list of strings"),
        ("middleware: 5\n", 1, "middleware must be a list of strings"),
        ("model: 5\n", 1, "model must be a mapping"),
        ("model:\n  temperature: 0.2\n  max_turns: abc\n", 3, "model.max_turns must be an integer"),
        ("security:\n  allowed_paths: /tmp/x\n", 2, "security.allowed_paths must be a list of strings"),
    ],
)
def test_known_keys_of_the_wrong_type_name_file_and_line(tmp_path, text, line, words):
    project = tmp_path / "project"
    project.mkdir()
    (project / "agent-apps.yaml").write_text(text)
    cm = make(tmp_path, tmp_path / "none")
    with pytest.raises(ConfigError) as info:
        cm.config_for(None)
    assert str(info.value) == f"{project / 'agent-apps.yaml'}:{line}: {words}"
