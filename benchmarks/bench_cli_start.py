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


def make_skills(directory: Path, n: int) -> None:
    source = (QUICKSTART / "word-count.skill.py").read_text()
    for i in range(n):
        text = source.replace("Count the words in a text.", f"Skill number {i}: count the words.")
        (directory / f"wc-{i:04d}.skill.py").write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=7, help="timed runs per command (default 7)")
    runs = parser.parse_args().runs

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

        rows = [
            ("invoke word-count (quickstart)", measure(
                [*cli, "invoke", "word-count", "--path", str(QUICKSTART), "text=hello"], runs, cwd=REPO, env=env
            ), "<= 120 ms"),
            ("list, 1,000 skills", measure([*cli, "list", "--path", str(many)], runs, cwd=work, env=env), "<= 200 ms"),
            ("list, 1,000 skills, cold cache", measure(
                [*cli, "list", "--path", str(many)], runs, cwd=work, env=env, before=empty_cache
            ), ""),
            ("python -c 'import agent_apps.cli'", measure(
                [sys.executable, "-c", "import agent_apps.cli"], runs, cwd=work, env=env
            ), ""),
        ]
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
