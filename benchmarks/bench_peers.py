"""How late a deadline stops a hostile peer (docs/security.md, "Peers").

    python benchmarks/bench_peers.py [--after 10] [--providers bedrock,anthropic,...]

Each model provider of agent-strands streams from a local fake that floods text deltas
for ever (``flood`` turns of :mod:`agent_apps.testing`); an ACP agent
(tests/extensions/hostile_acp_agent.py) floods message chunks, and another never
answers and ignores ``session/cancel``, the end of its stdin and SIGTERM. The run is
cancelled by a timer ``--after`` seconds into the flood, as ``--timeout`` does. Printed
per peer: how late the timer fired, and how long after it the run ended.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agent_apps import Cancelled, ContextManager, Signal
from agent_apps.testing.bedrock import FakeBedrock, dummy_aws_env
from agent_apps.testing.llm import FakeAnthropic, FakeOllama, FakeOpenAI

HOSTILE_ACP = Path(__file__).resolve().parents[1] / "tests" / "extensions" / "hostile_acp_agent.py"
FAKES = {"bedrock": FakeBedrock, "anthropic": FakeAnthropic, "openai": FakeOpenAI, "ollama": FakeOllama}


def model_config(name: str, fake: Any) -> dict[str, Any]:
    if name == "bedrock":
        return {"model_id": "m", "region": "us-east-1", "endpoint_url": fake.endpoint_url}
    url = fake.base_url if isinstance(fake, FakeOpenAI) else fake.url
    model = "openai/m" if name == "litellm" else "m"
    return {"provider": name, "model_id": model, "base_url": url, "api_key": "k"}


async def deadline(cm: ContextManager, config: dict[str, Any], after: float, *, on: str) -> tuple[float, float]:
    """(s the timer fired late, s from the deadline to the run's end), the timer set
    ``after`` seconds from the first event of type ``on``."""
    seen: list[str] = []
    unsubscribe = cm.events.subscribe("bench", lambda topic, event: seen.append(event["type"]))
    signal = Signal()
    fired: list[float] = []
    signal.add_callback(lambda reason: fired.append(time.monotonic()))
    # a cap far above what the flood reaches before the deadline, and short of the memory it takes
    call = {"prompt": "p", "config": {"max_retries": 0, "max_output_kb": 256 * 1024, **config}, "events": "bench"}
    task = asyncio.ensure_future(cm.invoke("agent", call, signal=signal))
    while on not in seen and not task.done():  # the flood is on
        await asyncio.sleep(0.01)
    due = time.monotonic() + after
    asyncio.get_running_loop().call_at(due, signal.cancel, "deadline")
    try:
        await task
    except Cancelled:  # as it should
        pass
    unsubscribe()
    return fired[0] - due, time.monotonic() - due


async def main(after: float, providers: list[str]) -> None:
    os.environ.update(dummy_aws_env())
    with tempfile.TemporaryDirectory() as directory:
        cm = ContextManager([], cwd=directory, home=directory, env=False, project=False, user=False, entry_points=False)
        print(f"{'peer':<22} {'timer late':>11} {'run ended after':>16}")
        for name in providers:
            with FAKES.get(name, FakeOpenAI)(turns=lambda body: {"text": "flood", "flood": True}) as fake:
                config = {"agent": "agent-strands", **model_config(name, fake)}
                late, ended = await deadline(cm, config, after, on="agent-message")
            print(f"{name + ' (flood)':<22} {late:>10.3f}s {ended:>15.3f}s")
        for mode in ("flood", "deaf"):
            config = {"agent": "agent-acp", "command": [sys.executable, str(HOSTILE_ACP), mode]}
            late, ended = await deadline(cm, config, after, on="agent-message" if mode == "flood" else "turn-start")
            print(f"{'agent-acp (' + mode + ')':<22} {late:>10.3f}s {ended:>15.3f}s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--after", type=float, default=10.0, help="seconds of flood before the deadline")
    parser.add_argument("--providers", default="bedrock,anthropic,openai,ollama,litellm")
    options = parser.parse_args()
    asyncio.run(main(options.after, [name for name in options.providers.split(",") if name]))
