"""The command line's start: whole-process time of `agent-apps invoke` and `list`.

    python benchmarks/bench_cli_start.py [--runs 7]

Each command runs as a whole process, RUNS times after one warm-up run (which writes
the bytecode cache and the skill-parse cache: bytecode caching is on, whatever
PYTHONDONTWRITEBYTECODE says), and `python -c pass` runs alternately with it, so that
every figure also reads as a ratio to a bare interpreter start measured in the same
run. Prints min / median / max in ms and the median ratio.

* invoke: the quickstart, as its README runs it from the repository's root:
  `agent-apps invoke word-count --path examples/quickstart/skills text=hello`;
* list: `agent-apps list --path DIR` over 1,000 generated code skills (copies of
  word-count), with the parse cache warm (the steady state: files older than two
  seconds, an earlier command has scanned them) and cold (an empty cache each run).

Goals (issue 19): invoke <= 120 ms, list of 1,000 skills <= 200 ms, on a quiet machine
where `python -c pass` takes about 15 ms (8x and 13x that start).

    python benchmarks/bench_cli_start.py --instructions

counts instead the instructions each command executes, once each, under valgrind's
callgrind (which must be installed): the same count every run, however busy the
machine, so a change of a few percent shows where milliseconds on a shared machine
cannot (the count leaves out waiting for the disk and the cost of loading shared
libraries, so it is a guide to the milliseconds, not a measure of them).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
QUICKSTART = REPO / "examples" / "quickstart" / "skills"


Before = Callable[[], None] | None  # run before each timed run (not timed)


def whole_process(argv: list[str], *, cwd: Path, env: dict[str, str], before: Before = None) -> float:
    """Milliseconds from start to exit of one run of ``argv``."""
    if before is not None:
        before()
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = (time.perf_counter() - start) * 1000
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.decode()[-500:]}")
    return elapsed


def measure(
    argv: list[str], runs: int, *, cwd: Path, env: dict[str, str], before: Before = None
) -> tuple[list[float], list[float]]:
    """``runs`` timings of ``argv`` and of ``python -c pass``, taken in turn."""
    bare = [sys.executable, "-c", "pass"]
    whole_process(argv, cwd=cwd, env=env)  # warm-up: bytecode and parse caches
    whole_process(bare, cwd=cwd, env=env)
    times, python = [], []
    for _ in range(runs):
        times.append(whole_process(argv, cwd=cwd, env=env, before=before))
        python.append(whole_process(bare, cwd=cwd, env=env))
    return times, python


def instructions(argv: list[str], *, cwd: Path, env: dict[str, str], before: Before = None) -> float:
    """Millions of instructions one run of ``argv`` executes, counted by callgrind."""
    whole_process(argv, cwd=cwd, env=env)  # warm-up: bytecode and parse caches
    if before is not None:
        before()
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv],
        cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    counts = [line.split()[-1] for line in done.stderr.splitlines() if "Collected :" in line]
    if done.returncode != 0 or not counts:
        raise SystemExit(f"valgrind {' '.join(argv)} failed ({done.returncode}): {done.stderr[-500:]}")
    return int(counts[-1]) / 1e6


def make_skills(directory: Path, n: int) -> None:
    source = (QUICKSTART / "word-count.skill.py").read_text()
    for i in range(n):
        text = source.replace("Count the words in a text.", f"Skill number {i}: count the words.")
        (directory / f"wc-{i:04d}.skill.py").write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=7, help="timed runs per command (default 7)")
    parser.add_argument(
        "--instructions", action="store_true", help="count instructions under callgrind instead of timing"
    )
    options = parser.parse_args()
    runs = options.runs
    if options.instructions and shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind (apt-get install valgrind)")

    script = Path(sys.executable).with_name("agent-apps")
    cli = [str(script)] if script.exists() else [sys.executable, "-m", "agent_apps"]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
        env.update(AGENT_APPS_HOME=str(work / "home"), AGENT_APPS_CACHE_DIR=str(work / "cache"), NO_COLOR="1")
        env.pop("AGENT_APPS_PATH", None)
        many = work / "skills"
        many.mkdir()
        make_skills(many, 1000)
        time.sleep(2.1)  # files count as unchanged once their times are 2 s old (parse_cache.SETTLE_NS)

        def empty_cache() -> None:
            shutil.rmtree(work / "cache" / "skills", ignore_errors=True)

        commands = [
            ("invoke word-count (quickstart)", [*cli, "invoke", "word-count", "--path", str(QUICKSTART), "text=hello"],
             REPO, None, "<= 120 ms"),
            ("list, 1,000 skills", [*cli, "list", "--path", str(many)], work, None, "<= 200 ms"),
            ("list, 1,000 skills, cold cache", [*cli, "list", "--path", str(many)], work, empty_cache, ""),
            ("python -c 'import agent_apps.cli'", [sys.executable, "-c", "import agent_apps.cli"], work, None, ""),
        ]
        if options.instructions:
            bare = instructions([sys.executable, "-c", "pass"], cwd=work, env=env)
            print("instructions executed, once each, under callgrind (millions)")
            print(f"{'command':<32} {'M instr':>8}  {'x python':>8}")
            for name, argv, cwd, before, _ in commands:
                count = instructions(argv, cwd=cwd, env=env, before=before)
                print(f"{name:<32} {count:8.1f}  {count / bare:8.1f}")
            print(f"{'python -c pass':<32} {bare:8.1f}")
            return
        rows = [(name, measure(argv, runs, cwd=cwd, env=env, before=before), goal)
                for name, argv, cwd, before, goal in commands]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"{runs} runs each, whole process, bytecode cache on; load average {load:.2f} at the end")
    print(f"{'command':<32} {'min':>7} {'median':>7} {'max':>7}  {'x python':>8}  goal")
    pythons: list[float] = []
    for name, (times, python), goal in rows:
        pythons += python
        ratio = statistics.median(t / p for t, p in zip(times, python, strict=True))
        print(
            f"{name:<32} {min(times):7.1f} {statistics.median(times):7.1f} {max(times):7.1f}  {ratio:8.1f}  {goal}"
        )
    print(f"{'python -c pass':<32} {min(pythons):7.1f} {statistics.median(pythons):7.1f} {max(pythons):7.1f}")


if __name__ == "__main__":
    main()
