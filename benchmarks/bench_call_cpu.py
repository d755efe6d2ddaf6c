"""The event loop thread's CPU time per host call from agent code, in a real run.

    python benchmarks/bench_call_cpu.py [--pairs 9]

``bench_run.py``'s host-call rows are wall time, which a loaded machine moves by more
than the changes one wants to see. This takes the same prompt skill (300 calls to a
no-op skill, journal on, ``model.journal: false``, ``model.retention: none``) and the
same skill with 0 calls, and measures ``time.thread_time()`` around each
``cm.invoke_sync``. A call's figure is the median over ``--pairs`` of
(CPU of the run with 300 calls - CPU of the run with none) / 300. Waiting (for the
GIL, for the CPU) does not count, so the figure moves far less with the load; work on
other threads (the store's, the pool's) is left out.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from bench_run import CALLS, NOOP, write_skill

from agent_apps import ContextManager

VARIANTS = {"journal on": "", "model.journal: false": ", journal: false", "model.retention: none": ", retention: none"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=9, help="runs with 300 and with 0 calls, per variant")
    pairs = parser.parse_args().pairs
    none = CALLS.replace("range(300)", "range(0)").replace("/ 300", "/ 1")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "noop.skill.py").write_text(NOOP)
        for index, extra in enumerate(VARIANTS.values()):
            write_skill(root, f"calls-{index}", CALLS, extra)
            write_skill(root, f"none-{index}", none, extra)
        cm = ContextManager([root], cwd=root, home=root / "home", env=False, project=False, user=False,
                            entry_points=False)

        def cpu(skill: str) -> float:
            start = time.thread_time()
            cm.invoke_sync(skill, {})
            return time.thread_time() - start

        for index in range(len(VARIANTS)):  # build/load the sandbox, open the store
            cpu(f"calls-{index}")
            cpu(f"none-{index}")
        print(f"{'event loop thread CPU per host call':<45} {'us':>7}")
        for index, name in enumerate(VARIANTS):
            per_call = [(cpu(f"calls-{index}") - cpu(f"none-{index}")) / 300 * 1e6 for _ in range(pairs)]
            print(f"{name:<45} {statistics.median(per_call):>7.1f}")
        cm.state.close()


if __name__ == "__main__":
    main()
