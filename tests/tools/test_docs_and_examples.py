"""The security page and the example tools.yaml stay true to the code."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from agent_apps.tools.cli_tools import load_tools_file
from agent_apps.tools.paths import BUILTIN_DENIED
from agent_apps.tools.settings import DEFAULT_SECURITY
from agent_apps.tools.subprocess import ALLOWED_ENV


def test_documented_defaults_are_the_defaults(repo_root: Path):
    text = (repo_root / "docs" / "security.md").read_text()
    documented = yaml.safe_load(re.findall(r"```yaml\n(.*?)```", text, re.S)[0])["security"]
    defaults = {
        **DEFAULT_SECURITY,
        "policy": {k: v for k, v in DEFAULT_SECURITY["policy"].items() if k not in ("ask", "deny")},
    }
    assert documented == defaults
    assert " ".join(BUILTIN_DENIED) in " ".join(text.split())
    assert " ".join(ALLOWED_ENV) in text


def test_example_tools_yaml_loads(repo_root: Path):
    skills, errors = load_tools_file(repo_root / "examples" / "tools" / "tools.yaml")
    assert errors == []
    assert [s.name for s in skills] == ["kubectl-get", "kubectl-apply", "git-log", "deploy-app"]
    git_log = skills[2]
    assert git_log.params["required"] == []  # count has a default, path is optional
