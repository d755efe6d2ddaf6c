"""``agent-apps new skill``: the files it writes run, and their tests pass, as written."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def agent_apps(*argv, cwd):
    return subprocess.run([sys.executable, "-m", "agent_apps", *argv], cwd=cwd, capture_output=True, text=True,
                          timeout=180)


@pytest.mark.parametrize(("name", "flags", "expected"), [
    ("word-tally", [], {"words": 4}),
    ("gist", ["--prompt"], {"words": 4, "gist": "an old silent pond"}),
])
def test_a_new_skill_runs_and_its_test_passes(tmp_path, name, flags, expected):
    made = agent_apps("new", "skill", name, *flags, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    kind = "md" if flags else "py"
    ident = name.replace("-", "_")
    assert made.stdout.splitlines() == [f"wrote skills/{name}.skill.{kind}", f"wrote tests/test_{ident}.py"]
    run = agent_apps("invoke", name, "text=an old silent pond", "-q", cwd=tmp_path)
    assert run.returncode == 0 and json.loads(run.stdout) == expected, run.stderr
    test = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"tests/test_{ident}.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert test.returncode == 0 and "1 passed" in test.stdout, test.stdout + test.stderr
    again = agent_apps("new", "skill", name, *flags, cwd=tmp_path)
    assert again.returncode == 2 and "exists: choose another name, or --force" in again.stderr


def test_elsewhere_and_bad_names(tmp_path):
    made = agent_apps("new", "skill", "x", "--dir", "lib/skills", "--tests", "checks", cwd=tmp_path)
    assert made.returncode == 0 and (tmp_path / "lib/skills/x.skill.py").is_file()
    assert "agent-apps invoke x --path lib/skills" in made.stderr
    test = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "checks/test_x.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert test.returncode == 0, test.stdout
    bad = agent_apps("new", "skill", "Bad_Name", cwd=tmp_path)
    assert bad.returncode == 2 and "'Bad_Name' is not a skill name" in bad.stderr
