"""The examples run as written (the commands the docs show: tests/test_docs.py)."""

from __future__ import annotations

import json
import subprocess
import sys

ROOT = __import__("pathlib").Path(__file__).resolve().parent.parent


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


def test_every_example_folder_says_what_it_is():
    folders = [d for d in (ROOT / "examples").iterdir() if d.is_dir()]
    assert folders and [d.name for d in folders if not (d / "README.md").is_file()] == []

