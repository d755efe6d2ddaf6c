"""The examples and the commands shown in the docs run as written."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

ROOT = __import__("pathlib").Path(__file__).resolve().parent.parent
QUICK = ROOT / "examples" / "quickstart" / "skills"


def cli(*argv, cwd=ROOT):
    return subprocess.run(
        [sys.executable, "-m", "agent_apps", *argv], cwd=cwd, capture_output=True, text=True, timeout=180
    )


def test_quickstart_script():
    run = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart" / "run.py")], capture_output=True, text=True, timeout=180
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[:3] == ["5", "4", "{'words': 5, 'distinct': 3}"]
    assert "at text: 42 is not of type 'string'" in lines[3]
    assert lines[4].startswith("An old silent pond")


@pytest.mark.parametrize(
    ("argv", "code", "stdout", "stderr"),
    [
        (["invoke", "word-count", "--path", str(QUICK), "text=a b a", "unique=true"], 0, "2\n", ""),
        (["invoke", "word-count", "--path", str(QUICK), "text=a rose is a rose", "unique=true"], 0, "3\n", ""),
        (
            ["invoke", "word-count", "--path", str(QUICK), "text:=42"],
            2,
            "",
            "error: word-count: invalid args at text: 42 is not of type 'string'\n",
        ),
    ],
)
def test_documented_commands(argv, code, stdout, stderr):
    run = cli(*argv)
    assert (run.returncode, run.stdout) == (code, stdout), run.stderr
    if stderr:
        assert run.stderr == stderr


def test_documented_haiku_run_and_config():
    run = cli("invoke", "haiku", "--path", str(QUICK), "task=a pond")
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("An old silent pond")
    assert "⚙ invoke" in run.stderr and "→ 4 words in the first line" in run.stderr
    config = cli("config", "haiku", "--path", str(QUICK), "--json")
    sources = json.loads(config.stdout)["sources"]
    assert sources["model.agent"].startswith("haiku metadata (")


def test_main_job_notes_digest():
    """The README's first command, after the install: the agent's structured digest."""
    run = cli(
        "invoke", "notes-digest", "--path", "examples/notes-digest/skills", "folder=examples/notes-digest/notes"
    )
    assert run.returncode == 0, run.stderr
    digest = json.loads(run.stdout)
    assert [n["file"] for n in digest["notes"]] == ["garden.md", "reading.md", "trip.md"]
    assert digest["open_todos"] == 5 and digest["notes"][2]["title"] == "Train trip to Vienna"
    assert digest["total_words"] == sum(n["words"] for n in digest["notes"])
    assert "✓ notes-digest (2 turns, 2 steps" in run.stderr
