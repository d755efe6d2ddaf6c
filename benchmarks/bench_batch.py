"""Batches: 1,000 scripted two-turn agent runs locally and on a local Ray cluster, and the
time Ray adds to each task.

    python benchmarks/bench_batch.py [--runs 1000] [--cpus 2]

Each part runs in a process of its own, so each peak RSS is that part's:

* **local**: ``cm.batch`` of ``--runs`` agent runs (two model turns, each running code
  in the sandbox; the scripted model) at the default concurrency; runs per second, and
  the peak RSS of the process;
* **ray**: the same batch on a local Ray cluster of ``--cpus`` CPUs (one worker per
  CPU); the time to start the cluster and the workers, runs per second once they are
  up, the driver's peak RSS and each worker's;
* **overhead**: a trivial code skill, one task at a time, locally and on Ray: the
  difference per task is what a Ray round trip adds (submit, run on the worker,
  ``ray.wait``, fetch the result).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from agent_apps import ContextManager

AGENT = """---
description: Count the words of a text, in two scripted turns.
metadata:
  model:
    agent: agent-scripted
    script:
      - code: |
          memory["n"] = len(memory["args"]["text"].split())
      - code: |
          ctx.manager.finish(memory["n"])
---
Count the words.
"""
COUNT = """
frontmatter = {"params": {"type": "object", "properties": {"text": {"type": "string"}}}}
async def main(ctx, args):
    return len(args["text"].split())
"""


def manager(root: Path) -> ContextManager:
    skills = root / "skills"
    skills.mkdir(exist_ok=True)
    (skills / "count-agent.skill.md").write_text(AGENT)
    (skills / "count.skill.py").write_text(COUNT)
    return ContextManager([skills], cwd=root, home=root / "home", env=False, project=False, user=False,
                          entry_points=False, state=root / "state.db")


def inputs(n: int) -> list[dict]:
    return [{"text": "w " * (i % 9)} for i in range(n)]


def peak_rss_mb(pid: int | None = None) -> float:
    if pid is None:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def timed_batch(cm: ContextManager, name: str, items: list[dict], **options) -> dict:
    """Run one batch; seconds from the first result's start (workers up) to the last."""
    started = time.perf_counter()
    async with cm.batch(name, items, **options) as batch:
        await batch.start()
        up = time.perf_counter()
        failed, workers = 0, set()
        async for result in batch:
            failed += not result.ok
            if result.worker:
                workers.add(result.worker["pid"])
        done = time.perf_counter()
        worker_rss = [peak_rss_mb(pid) for pid in workers if Path(f"/proc/{pid}").exists()]
    return {"start": up - started, "seconds": done - up, "failed": failed, "concurrency": batch.concurrency,
            "workers": len(workers), "worker_rss": worker_rss}


def part(name: str, runs: int, cpus: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        cm = manager(Path(tmp))
        if name == "local":
            asyncio.run(timed_batch(cm, "count-agent", inputs(20)))  # the sandbox loaded, the pool warm
            figures = asyncio.run(timed_batch(cm, "count-agent", inputs(runs)))
        elif name == "ray":
            import ray

            started = time.perf_counter()
            ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False, logging_level="WARNING")
            cluster = time.perf_counter() - started
            figures = asyncio.run(timed_batch(cm, "count-agent", inputs(runs), ray="auto"))
            figures["cluster"] = cluster
            ray.shutdown()
        else:  # overhead: one trivial task at a time
            import ray

            n = min(runs, 300)
            asyncio.run(timed_batch(cm, "count", inputs(20), concurrency=1))
            local = asyncio.run(timed_batch(cm, "count", inputs(n), concurrency=1))
            ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False, logging_level="WARNING")
            on_ray = asyncio.run(timed_batch(cm, "count", inputs(n), concurrency=1, ray="auto"))
            ray.shutdown()
            figures = {"local_ms": local["seconds"] / n * 1000, "ray_ms": on_ray["seconds"] / n * 1000}
        figures["rss"] = peak_rss_mb()
        return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--cpus", type=int, default=2)
    parser.add_argument("--part", choices=["local", "ray", "overhead"])
    args = parser.parse_args()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if args.part:
        print(json.dumps(part(args.part, args.runs, args.cpus)))
        return
    figures = {}
    for name in ("local", "ray", "overhead"):
        out = subprocess.run([sys.executable, __file__, "--part", name, "--runs", str(args.runs), "--cpus",
                              str(args.cpus)], capture_output=True, text=True, check=True)
        figures[name] = json.loads(out.stdout.strip().splitlines()[-1])
    local, on_ray, overhead = figures["local"], figures["ray"], figures["overhead"]
    n = args.runs
    rows = [
        (f"local: {n} two-turn agent runs, concurrency {local['concurrency']}",
         f"{n / local['seconds']:.0f} runs/s ({local['seconds']:.1f} s), {local['failed']} failed"),
        ("local: peak RSS", f"{local['rss']:.0f} MB"),
        (
            f"ray ({args.cpus} CPUs): cluster start / workers start",
            f"{on_ray['cluster']:.1f} s / {on_ray['start']:.1f} s",
        ),
        (f"ray: {n} two-turn agent runs, concurrency {on_ray['concurrency']}, {on_ray['workers']} workers",
         f"{n / on_ray['seconds']:.0f} runs/s ({on_ray['seconds']:.1f} s), {on_ray['failed']} failed"),
        ("ray: peak RSS, driver / each worker",
         f"{on_ray['rss']:.0f} MB / " + ", ".join(f"{mb:.0f}" for mb in on_ray["worker_rss"]) + " MB"),
        ("one trivial task at a time: local / ray", f"{overhead['local_ms']:.2f} ms / {overhead['ray_ms']:.2f} ms"),
        ("what Ray adds per task", f"{overhead['ray_ms'] - overhead['local_ms']:.2f} ms"),
    ]
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        print(f"{label:<{width}}  {value}")


if __name__ == "__main__":
    main()
