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


def test_context_example_runs_as_its_readme_says():
    """examples/context: the prompt (stable prefix, memory for the message), then the agent."""
    run = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "context" / "run.py")], capture_output=True, text=True, timeout=180
    )
    assert run.returncode == 0, run.stderr
    prompt, answer = run.stdout.split("=" * 72 + "\n")
    stable, dynamic = prompt.split("----- the stable prefix ends here (a cache point goes here) -----")
    assert stable.startswith("You are the user's travel assistant.")
    for section in ("# Your Identity", "# Core Guardrails", "# User Profile", "## How you work", "## Sensitive data",
                    "async def skill_list(", "- trip-planning: How to plan a trip"):
        assert section in stable, section
    assert "[MEMORY]\n- (MEMORY.md:17, Auto-captured -- 2026-05-09) Sam wants to visit Porto" in dynamic
    assert answer.startswith("From memory: Sam wants to visit Porto in October")
    cli_run = cli("invoke", "assistant", "--path", "examples/context/skills", "task=Can we plan my October trip?")
    assert cli_run.returncode == 0, cli_run.stderr
    from agent_apps.state.embeddings import embedder_for

    memories = 3 if embedder_for("auto") is None else 4  # by meaning too when the model is installed (its README)
    assert f"→ 11 lines of guidance; {memories} memories; - Passport (check the expiry date)" in cli_run.stderr


def test_the_information_agent_aggregates_runs_by_their_id():
    """examples/run-monitor: run-stats hears every run on run.* and the digest reports them."""
    run = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "run-monitor" / "run.py")], capture_output=True, text=True, timeout=180
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[:3] == ["run.*", "Looks right to me.", "Looks right to me."]
    digest = lines[3:5]
    assert all(line.startswith("proofread (") for line in digest)
    assert all("done, 3 turns, 3 model calls, 2 code runs (1 failed)" in line for line in digest)
    assert digest[0].split()[1] != digest[1].split()[1]  # two runs, two ids
    assert lines[5] == "1 run(s) still going (this one included)"
    assert lines[6] == "[('proofread', 'done'), ('runs-digest', 'done')]"


def test_durability_example_waits_for_approval_then_resumes(tmp_path):
    """docs/durability.md's opening, step by step, in real processes on a copy of the folder."""
    import os
    import re
    import shutil

    work = tmp_path / "durability"
    shutil.copytree(ROOT / "examples" / "durability", work)
    env = {**os.environ, "AGENT_APPS_STATE": str(tmp_path / "state.db")}

    def run(*argv):
        return subprocess.run(
            [sys.executable, "-m", "agent_apps", *argv], cwd=work, env=env, capture_output=True, text=True,
            timeout=180, stdin=subprocess.DEVNULL,
        )

    waiting = run("invoke", "scribe", "--path", "skills")
    assert waiting.returncode == 3, waiting.stderr
    run_id = re.search(r"run (\w+) is waiting for approval of file-write", waiting.stderr)[1]
    assert not (work / "out.txt").exists()
    approved = run("approve", run_id[:8])
    assert approved.returncode == 0 and approved.stdout.startswith("approved file-write"), approved.stderr
    resumed = run("resume", run_id[:8])
    assert resumed.returncode == 0 and resumed.stdout.strip() == "Done.", resumed.stderr
    assert (work / "out.txt").read_text() == "hello\n"
