"""The pipeline's share of a host call from agent code, in a real run.

    python benchmarks/bench_pipeline_in_run.py [--loop 3000]

``bench_run.py``'s prompt skill (300 calls to a no-op skill, journal on) runs with
``pipeline.invoke`` wrapped: each call of ``noop`` made by the run's gateway is timed
with ``time.thread_time_ns()`` (the event loop thread's CPU, which the load moves far
less than wall time). Printed: the median and quartiles over the 300 calls, for three
runs. Then, on one run's first call, the same ``pipeline.invoke`` with the run's own
contexts and options is repeated ``--loop`` times back to back: the pipeline's CPU
when nothing runs between its calls. The first figure is the larger: between two calls
the sandbox's guest runs, and the pipeline's code and data are no longer in the CPU's
caches, so fewer Python calls per invocation count twice.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_run import CALLS, NOOP, call_us, write_skill

from agent_apps import ContextManager, pipeline


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--loop", type=int, default=3000, help="back-to-back invocations on the first call")
    loop = parser.parse_args().loop
    invoke = pipeline.invoke
    samples: list[int] = []
    back_to_back: list[float] = []

    async def timed(cm: ContextManager, ref: Any, args: Any, parent: Any, options: dict[str, Any]) -> Any:
        if ref != "noop":
            return await invoke(cm, ref, args, parent, options)
        if not back_to_back:
            start = time.thread_time_ns()
            for _ in range(loop):
                await invoke(cm, ref, args, parent, dict(options))
            back_to_back.append((time.thread_time_ns() - start) / loop / 1000)
        start = time.thread_time_ns()
        try:
            return await invoke(cm, ref, args, parent, options)
        finally:
            samples.append(time.thread_time_ns() - start)

    pipeline.invoke = timed  # type: ignore[assignment]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "noop.skill.py").write_text(NOOP)
        write_skill(root, "calls", CALLS)
        cm = ContextManager([root], cwd=root, home=root / "home", env=False, project=False, user=False,
                            entry_points=False)
        call_us(cm, "calls")  # build/load the sandbox, open the store, the back-to-back loop
        print(f"{'pipeline.invoke of a host call, CPU (us)':<45} {'median':>7} {'p25':>6} {'p75':>6}")
        for run in range(3):
            samples.clear()
            call_us(cm, "calls")
            p25, median, p75 = statistics.quantiles(samples, n=4)
            print(f"{f'in a run, run {run + 1}':<45} {median / 1000:>7.1f} {p25 / 1000:>6.1f} {p75 / 1000:>6.1f}")
        print(f"{'back to back, same contexts and options':<45} {back_to_back[0]:>7.1f}")
        cm.state.close()


if __name__ == "__main__":
    main()
