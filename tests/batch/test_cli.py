"""``agent-apps batch`` locally: the results file, bad lines, exit statuses, resuming
(and refusing a results file of another input), repairing a cut line, progress, and a
real process interrupted with Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from agent_apps.cli import main

from .conftest import read_lines, write_lines


@pytest.fixture
def batch(skills, tmp_path, capsys):
    """``batch(NAME, *options)``: run the command in this process; (status, stderr)."""

    def run(*argv: str) -> tuple[int, str]:
        status = main(["batch", *argv, "--path", str(skills)])
        return status, capsys.readouterr().err

    return run


def indexes(path):
    return sorted(line["index"] for line in read_lines(path))


def test_one_result_line_per_input_bad_lines_are_their_errors(batch, tmp_path):
    tasks = write_lines(tmp_path / "tasks.jsonl", [{"text": "a b"}, "not json", {"text": 3}, "", [1], {"text": "c"}])
    out = tmp_path / "results.jsonl"
    status, err = batch("count", "--input", str(tasks), "--output", str(out))
    assert status == 1
    assert "error: 3 of 5 runs failed (the first: index " in err and str(out) in err
    by = {line["index"]: line for line in read_lines(out)}
    assert sorted(by) == [0, 1, 2, 4, 5]  # line 4 is blank: not an input
    assert by[0]["ok"] and by[0]["result"] == 2 and by[5]["result"] == 1
    assert by[1]["error"] == {"type": "InputInvalid", "message": f"{tasks}:2: not JSON: Expecting value (column 1)"}
    assert by[2]["error"]["type"] == "ArgsInvalid" and by[2]["error"]["path"] == "text"
    assert by[4]["error"]["message"] == f"{tasks}:5: expected a JSON object of args, got an array"
    for line in by.values():
        assert set(line) >= {"index", "ok", "seconds", "input_hash"} and ("result" in line) == line["ok"]
    assert by[0]["run_id"] and "run_id" not in by[1]


def test_hostile_input_lines_are_each_their_own_error_and_the_batch_goes_on(batch, tmp_path):
    deep = '{"text": ' + "[" * 200_000 + "]" * 200_000 + "}"
    lines = [
        {"text": "one"},
        deep,  # 200,000 deep: was a RecursionError that ended the whole batch
        '{"text": ' + "[" * 129 + "]" * 129 + "}",  # just past the bound
        '{"text": "x", "n": NaN}',
        '{"text": "x", "n": 1e999}',
        '{"text": "x", "n": Infinity}',
        {"text": "two words"},
        '{"text": "' + "\\ud800" + '"}',  # a lone surrogate, as JSON allows it
    ]
    tasks = write_lines(tmp_path / "tasks.jsonl", lines)
    with tasks.open("ab") as fh:
        fh.write(b'{"text": "\xff\xfe"}\n')  # not UTF-8
    out = tmp_path / "results.jsonl"
    status, err = batch("count", "--input", str(tasks), "--output", str(out))
    assert status == 1 and "internal error" not in err
    by = {line["index"]: line for line in read_lines(out)}
    assert sorted(by) == list(range(9))  # one result line per input, none lost
    assert by[0]["result"] == 1 and by[6]["result"] == 2 and by[7]["ok"]
    for index in (1, 2):
        assert by[index]["error"] == {"type": "InputInvalid",
                                      "message": f"{tasks}:{index + 1}: JSON nested deeper than 128 levels"}
    assert by[3]["error"]["message"] == f"{tasks}:4: NaN is not a JSON number"
    assert by[4]["error"]["message"] == f"{tasks}:5: 1e999 is too large for a JSON number"
    assert by[5]["error"]["message"] == f"{tasks}:6: Infinity is not a JSON number"
    assert by[8]["error"]["message"] == f"{tasks}:9: not UTF-8 text"


def test_a_line_nested_to_the_bound_still_runs(batch, tmp_path):
    ok = '{"text": "a b", "extra": ' + "[" * 127 + "]" * 127 + "}"  # 128 levels with the object
    tasks = write_lines(tmp_path / "tasks.jsonl", [ok])
    folder = tmp_path / "free"
    folder.mkdir()
    (folder / "any.skill.py").write_text(
        'frontmatter = {"params": {"type": "object"}}\nasync def main(ctx, args):\n    return len(args["text"])\n'
    )
    out = tmp_path / "results.jsonl"
    status, err = batch("any", "--input", str(tasks), "--output", str(out), "--path", str(folder))
    assert status == 0, err
    assert read_lines(out)[0]["result"] == 3


def test_all_ok_exits_0_and_reports_progress(batch, tmp_path):
    tasks = write_lines(tmp_path / "tasks.jsonl", [{"text": "w " * n} for n in range(20)])
    out = tmp_path / "results.jsonl"
    status, err = batch("count-agent", "--input", str(tasks), "--output", str(out), "--concurrency", "3")
    assert status == 0, err
    assert err.splitlines()[0] == "count-agent: 20 to run, 3 at a time"
    assert err.splitlines()[-1].startswith("count-agent: 20/20  ")
    assert sorted((line["index"], line["result"]) for line in read_lines(out)) == [(n, n) for n in range(20)]


def test_events_are_json_lines(batch, tmp_path):
    tasks = write_lines(tmp_path / "tasks.jsonl", [{"text": "a"}, {"text": 1}])
    out = tmp_path / "results.jsonl"
    status, err = batch("count", "--input", str(tasks), "--output", str(out), "--events")
    assert status == 1
    events = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    assert [e["type"] for e in events] == ["batch-start", "batch-result", "batch-result", "batch-end"]
    assert events[0]["total"] == 2 and events[0]["concurrency"] >= 1
    assert {e["index"]: e["ok"] for e in events[1:3]} == {0: True, 1: False}
    assert events[-1]["done"] == 2 and events[-1]["failed"] == 1 and not events[-1]["interrupted"]


def test_resume_runs_only_what_is_missing(batch, tmp_path):
    tasks = write_lines(tmp_path / "tasks.jsonl", [{"text": "w " * n} for n in range(6)])
    out = tmp_path / "results.jsonl"
    assert batch("count", "--input", str(tasks), "--output", str(out))[0] == 0
    kept = read_lines(out)[:2]
    out.write_text("".join(json.dumps(line) + "\n" for line in kept))
    status, err = batch("count", "--input", str(tasks), "--output", str(out), "--resume")
    assert status == 0, err
    assert "4 to run" in err and "2 done before" in err
    assert indexes(out) == list(range(6))
    assert read_lines(out)[:2] == kept  # what was there stays as it was
    status, err = batch("count", "--input", str(tasks), "--output", str(out), "--resume")
    assert status == 0 and "every one of the 6 inputs has a result" in err


def test_an_existing_results_file_needs_resume(batch, tmp_path):
    tasks = write_lines(tmp_path / "tasks.jsonl", [{"text": "a"}])
    out = tmp_path / "results.jsonl"
    out.write_text('{"index": 0, "ok": true, "result": 1}\n')
    status, err = batch("count", "--input", str(tasks), "--output", str(out))
    assert status == 2 and "exists: add --resume" in err
    assert out.read_text() == '{"index": 0, "ok": true, "result": 1}\n'  # untouched


def test_resume_refuses_results_of_another_input_or_skill(batch, tmp_path):
    tasks = write_lines(tmp_path / "tasks.jsonl", [{"text": "a"}, {"text": "b"}])
    out = tmp_path / "results.jsonl"
    assert batch("count", "--input", str(tasks), "--output", str(out))[0] == 0
    before = out.read_text()
    other = write_lines(tmp_path / "other.jsonl", [{"text": "a"}, {"text": "changed"}])
    status, err = batch("count", "--input", str(other), "--output", str(out), "--resume")
    assert status == 2 and "the result for index 1 was not made from this input with count" in err
    assert f"differs from line 2 of {other}" in err
    status, err = batch("count-agent", "--input", str(tasks), "--output", str(out), "--resume")
    assert status == 2 and "with count-agent" in err
    shorter = write_lines(tmp_path / "shorter.jsonl", [{"text": "a"}])
    status, err = batch("count", "--input", str(shorter), "--output", str(out), "--resume")
    assert status == 2 and "has no input" in err
    assert out.read_text() == before


def test_resume_repairs_a_cut_last_line_and_refuses_a_broken_one(batch, tmp_path):
    tasks = write_lines(tmp_path / "tasks.jsonl", [{"text": "a"}, {"text": "b c"}, {"text": "d"}])
    out = tmp_path / "results.jsonl"
    assert batch("count", "--input", str(tasks), "--output", str(out))[0] == 0
    lines = out.read_text().splitlines(keepends=True)
    out.write_text("".join(lines[:2]) + lines[2][:25])  # a crash in the middle of the last write
    status, err = batch("count", "--input", str(tasks), "--output", str(out), "--resume")
    assert status == 0 and "removed its last line, cut short" in err
    assert indexes(out) == [0, 1, 2]
    out.write_text(lines[0] + "garbage\n" + lines[1])
    status, err = batch("count", "--input", str(tasks), "--output", str(out), "--resume")
    assert status == 2 and f"{out}:2: not a result line" in err
    out.write_text(lines[0] + lines[0])
    status, err = batch("count", "--input", str(tasks), "--output", str(out), "--resume")
    assert status == 2 and "a second result for index" in err
    out.write_text(lines[0] + '{"index": 1, "ok": true, "result": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    status, err = batch("count", "--input", str(tasks), "--output", str(out), "--resume")
    assert status == 2 and f"{out}:2: not a result line" in err  # not a RecursionError


def test_rerun_failed_runs_the_failures_again(batch, tmp_path, skills):
    tasks = write_lines(tmp_path / "tasks.jsonl", [{"text": "a"}, {"text": 5}])
    out = tmp_path / "results.jsonl"
    assert batch("count", "--input", str(tasks), "--output", str(out))[0] == 1
    status, err = batch("count", "--input", str(tasks), "--output", str(out), "--resume")
    assert status == 1 and "every one of the 2 inputs has a result" in err and "--rerun-failed" in err
    skill = skills / "count.skill.py"  # the fix: the skill takes numbers too
    skill.write_text(skill.read_text().replace('{"type": "string"}', "{}").replace('args["text"]', 'str(args["text"])'))
    status, err = batch("count", "--input", str(tasks), "--output", str(out), "--resume", "--rerun-failed")
    assert status == 0, err
    assert [(line["index"], line["ok"]) for line in read_lines(out)] == [(0, True), (1, True)]


def test_a_failed_input_line_fixed_is_run_again_with_rerun_failed(batch, tmp_path):
    """Before: --resume after fixing a failed line refused the results file and named
    only --input and a new --output, not --rerun-failed."""
    tasks = write_lines(tmp_path / "tasks.jsonl", [{"text": "a b"}, {"text": 3}, {"text": "c"}])
    out = tmp_path / "results.jsonl"
    status, err = batch("count", "--input", str(tasks), "--output", str(out))
    assert status == 1 and err.splitlines()[-1].endswith("(once fixed, --resume --rerun-failed runs them again)")
    write_lines(tasks, [{"text": "a b"}, {"text": "x y z"}, {"text": "c"}])  # the fix, in the input
    status, err = batch("count", "--input", str(tasks), "--output", str(out), "--resume")
    assert status == 2 and "that run failed: add --rerun-failed to run the failed inputs again" in err
    status, err = batch("count", "--input", str(tasks), "--output", str(out), "--resume", "--rerun-failed")
    assert status == 0, err
    assert sorted((line["index"], line["result"]) for line in read_lines(out)) == [(0, 2), (1, 3), (2, 1)]


def test_bad_command_lines_exit_2(batch, tmp_path):
    tasks = write_lines(tmp_path / "tasks.jsonl", [{"text": "a"}])
    out = str(tmp_path / "results.jsonl")
    assert batch("nope", "--input", str(tasks), "--output", out)[0] == 2
    status, err = batch("count", "--input", str(tmp_path / "missing.jsonl"), "--output", out)
    assert status == 2 and "no such file" in err
    status, err = batch("count", "--input", str(tasks), "--output", out, "--retries", "2")
    assert status == 2 and "--retries applies to --ray only" in err
    status, err = batch("count", "--input", str(tasks), "--output", out, "--rerun-failed")
    assert status == 2 and "--rerun-failed goes with --resume" in err
    with pytest.raises(SystemExit) as exit_:
        batch("count", "--input", str(tasks), "--output", out, "--concurrency", "0")
    assert exit_.value.code == 2
    status, err = batch("count", "--input", str(tasks), "--output", out, "--tenant", "two words")
    assert status == 2 and "error: --tenant: " in err
    status, err = batch("./count.skill.py", "--input", str(tasks), "--output", out, "--ray", "auto")
    assert status == 2 and "NAME must be a skill name" in err
    assert not os.path.exists(out)


# -- real processes ------------------------------------------------------------------


def _env():
    return {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}


def test_no_other_command_imports_ray(tmp_path):
    code = (
        "import sys\nfrom agent_apps.cli import main\n"
        "for argv in (['list'], ['describe', 'skill-list'], ['config'], ['batch', '--help']):\n"
        "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
        "print('ray' in sys.modules)\n"
    )
    env = {**os.environ, "AGENT_APPS_HOME": str(tmp_path / "home")}
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=60)
    assert result.stdout.strip().splitlines()[-1] == "False", result.stderr


def test_a_local_batch_imports_no_ray(skills, tmp_path):
    tasks = write_lines(tmp_path / "tasks.jsonl", [{"text": "a"}])
    code = (
        "import sys\nfrom agent_apps.cli import main\n"
        f"status = main(['batch', 'count', '--input', {str(tasks)!r}, '--output', {str(tmp_path / 'o.jsonl')!r}, "
        f"'--path', {str(skills)!r}])\n"
        "print(status, sorted(m for m in ('ray', 'wasmtime', 'boto3') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=_env(), capture_output=True, text=True,
                            timeout=60)
    assert result.stdout.strip().splitlines()[-1] == "0 []", result.stderr


def _interrupt(argv, cwd, out, wait_for, sig):
    """Run ``argv``; once ``out`` has ``wait_for`` lines, send ``sig``; (status, stderr)."""
    proc = subprocess.Popen(argv, cwd=cwd, env=_env(), stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (not out.exists() or len(read_lines(out)) < wait_for):
            time.sleep(0.05)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    return proc.returncode, err


def test_ctrl_c_leaves_a_valid_results_file_and_resume_finishes(skills, tmp_path):
    quick, slow = 6, 4
    tasks = write_lines(tmp_path / "tasks.jsonl", [{"s": 0}] * quick + [{"s": 60}] * slow)
    out = tmp_path / "results.jsonl"
    argv = [sys.executable, "-m", "agent_apps", "batch", "slow", "--input", str(tasks), "--output", str(out),
            "--path", str(skills), "--concurrency", "5"]
    status, err = _interrupt(argv, tmp_path, out, quick, signal.SIGINT)
    assert status == 130, err
    assert f"interrupted after {quick} of {quick + slow} runs" in err and "--resume" in err
    assert out.read_bytes().endswith(b"\n") and indexes(out) == list(range(quick))
    write_lines(tasks, [{"s": 0}] * (quick + slow))  # lines without a result may change
    resumed = subprocess.run([*argv, "--resume"], cwd=tmp_path, env=_env(), capture_output=True, text=True,
                             timeout=60)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{slow} to run" in resumed.stderr
    assert indexes(out) == list(range(quick + slow))  # each input exactly once


def test_sigterm_stops_like_ctrl_c(skills, tmp_path):
    tasks = write_lines(tmp_path / "tasks.jsonl", [{"s": 0}, {"s": 60}, {"s": 60}])
    out = tmp_path / "results.jsonl"
    argv = [sys.executable, "-m", "agent_apps", "batch", "slow", "--input", str(tasks), "--output", str(out),
            "--path", str(skills)]
    status, err = _interrupt(argv, tmp_path, out, 1, signal.SIGTERM)  # as a job scheduler stops a job
    assert status == 130 and "interrupted after 1 of 3 runs" in err
    assert indexes(out) == [0]
