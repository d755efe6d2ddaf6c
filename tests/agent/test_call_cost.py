"""What one host call from agent code costs, counted rather than timed (times depend on
the machine's load; counts do not). benchmarks/bench_run.py times the same calls."""

from __future__ import annotations

import cProfile
import json
import sys
from pathlib import Path

import pytest

from agent_apps import ContextManager

NOOP = 'frontmatter = {"params": {"type": "object"}}\nasync def main(ctx, args):\n    return 1\n'
CALLS = "for _ in range({n}):\n    await ctx.manager.invoke('noop', {{}})\nctx.manager.finish(1)\n"
PROMPT = """---
params: {{type: object}}
allowed-tools: [noop]
metadata:
  model: {{agent: agent-scripted, script: [{{code: {code}}}]}}
---
Go.
"""


@pytest.fixture
def cm(tmp_path: Path) -> ContextManager:
    (tmp_path / "noop.skill.py").write_text(NOOP)
    for n in (0, 40):
        (tmp_path / f"calls{n}.skill.md").write_text(PROMPT.format(code=json.dumps(CALLS.format(n=n))))
    manager = ContextManager([tmp_path], cwd=tmp_path, env=False, project=False, user=False, entry_points=False)
    assert manager.invoke_sync("calls40") == 1  # catalog, validators, sandbox pool ready
    return manager


def _counts(cm: ContextManager, skill: str) -> dict[tuple[str, str], int]:
    """How often each function ran in one run of ``skill``: (file name, function name)."""
    profiler = cProfile.Profile()
    profiler.enable()
    assert cm.invoke_sync(skill) == 1
    profiler.disable()
    profiler.create_stats()
    counts: dict[tuple[str, str], int] = {}
    for (file, _, name), (_, calls, *_) in profiler.stats.items():  # type: ignore[attr-defined]
        key = (Path(file).name, name)
        counts[key] = counts.get(key, 0) + calls
    return counts


def test_a_host_call_makes_none_of_the_calls_it_has_no_use_for(cm):
    """Per host call, nothing runs that has nothing to do: no attachments to check, no
    span to end, no journal to look up in a run that is not resumed, no awaitable test
    of the gateway's coroutine, no layer between the journal's entry and its queue, no
    Python frames of the json module around its C encoder and scanner; and without
    OpenTelemetry imported, no look for a tracer."""
    idle, busy = _counts(cm, "calls0"), _counts(cm, "calls40")
    per_call = [
        ("pipeline.py", "_attachments"),
        ("tracing.py", "end"),
        ("durable.py", "replayed"),
        ("durable.py", "write"),  # AgentJournal.write; RunJournal.write runs once per call
        ("inspect.py", "isawaitable"),
        ("encoder.py", "encode"),  # JSONEncoder's: the answer, the report and the journal call the C encoder
        ("encoder.py", "iterencode"),
    ]
    if "opentelemetry.trace" not in sys.modules:
        per_call.append(("tracing.py", "tracer"))
    grown = {key: busy.get(key, 0) - idle.get(key, 0) for key in per_call}
    # RunJournal.write and AgentJournal.write share a name: one per call is the queue's own
    assert grown.pop(("durable.py", "write")) == 40
    # one parse per call: the guest's request; the report's copy of the args is scanned
    assert busy[("decoder.py", "decode")] - idle.get(("decoder.py", "decode"), 0) == 40
    assert grown == dict.fromkeys(grown, 0)
    # the calls were made: the skill ran 40 more times
    assert busy[("noop.skill.py", "main")] - idle.get(("noop.skill.py", "main"), 0) == 40
