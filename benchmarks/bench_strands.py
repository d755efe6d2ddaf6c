"""agent-strands overhead per turn, against the local fake Bedrock: everything but the model.

    python benchmarks/bench_strands.py

Real Strands and boto3 speak HTTP (ConverseStream, event-stream framing) to
``agent_apps.testing.FakeBedrock`` on 127.0.0.1, which answers at once, so the numbers
are what the provider adds to a model turn: request signing and serialization, the
Strands event loop, stream parsing in a worker thread, the hook and invoke callbacks, and
the sandbox run. The scripted provider, on the same turns, is the baseline. The cold row
is a first agent run in a fresh process: importing Strands, boto3 and OpenTelemetry, and
building the client.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from agent_apps import ContextManager
from agent_apps.testing.bedrock import FakeBedrock, dummy_aws_env

MODEL = "anthropic.claude-bench-v1:0"
COLD = """
import asyncio, sys, time
from agent_apps import ContextManager
from agent_apps.testing.bedrock import FakeBedrock
with FakeBedrock([{"text": "hi"}]) as fake:
    cm = ContextManager([], env=False, project=False, user=False, entry_points=False)
    config = {"agent": "agent-strands", "model_id": "m", "endpoint_url": fake.endpoint_url, "region": "us-east-1"}
    start = time.perf_counter()
    asyncio.run(cm.invoke("agent", {"prompt": "bench", "config": config}))
    print((time.perf_counter() - start) * 1000)
"""


def turns(n: int) -> list[dict]:
    return [{"code": "x = 1 + 1"} for _ in range(n - 1)] + [{"text": "done"}]


def fake_turns(n: int) -> list[dict]:
    code = {"tool_uses": [{"name": "invoke", "input": {"code": "x = 1 + 1"}}]}
    return [code for _ in range(n - 1)] + [{"text": "done"}]


async def per_turn_ms(cm: ContextManager, config: dict, n: int, runs: int, fake: FakeBedrock | None) -> float:
    samples = []
    for _ in range(runs):
        if fake is not None:
            fake.add_turns(*fake_turns(n))
        start = time.perf_counter()
        await cm.invoke("agent", {"prompt": "bench", "config": config})
        samples.append((time.perf_counter() - start) * 1000 / n)
    return statistics.median(samples)


async def main() -> None:
    os.environ.update(dummy_aws_env())
    n = 10
    with tempfile.TemporaryDirectory() as tmp, FakeBedrock(model_ids=[MODEL]) as fake:
        root = Path(tmp)
        cm = ContextManager([root], cwd=root, home=root / "home", env=False, project=False, user=False,
                            entry_points=False)
        strands = {"agent": "agent-strands", "model_id": MODEL, "endpoint_url": fake.endpoint_url}
        scripted = {"agent": "agent-scripted", "script": turns(n)}
        await per_turn_ms(cm, scripted, n, 2, None)  # warm the sandbox pool
        await per_turn_ms(cm, strands, n, 2, fake)  # import Strands once
        base = await per_turn_ms(cm, scripted, n, 7, None)
        real = await per_turn_ms(cm, strands, n, 7, fake)
    with tempfile.TemporaryDirectory() as home:  # the fresh process keeps its home out of the real one
        cold = subprocess.run(
            [sys.executable, "-c", COLD], env={**os.environ, "AGENT_APPS_HOME": home}, capture_output=True,
            text=True, check=True,
        ).stdout.split()[-1]
    print(f"{'measure':<52} {'value':>10}")
    print(f"{'turn with one invoke, agent-scripted (baseline)':<52} {base:>7.2f} ms")
    print(f"{'turn with one invoke, agent-strands + fake Bedrock':<52} {real:>7.2f} ms")
    print(f"{'first agent-strands run in a fresh process':<52} {float(cold):>7.0f} ms")


if __name__ == "__main__":
    asyncio.run(main())
