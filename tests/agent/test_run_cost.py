"""What one agent run costs, counted rather than timed (times depend on the machine's
load; counts do not): how often a run resolves the config cascade, and that its
schemas are checked on the quick path. benchmarks/bench_run.py times the same run."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_apps import ContextManager, config

ONCE = "---\nmetadata:\n  model: {agent: agent-scripted, script: [{code: 'ctx.manager.finish(1)'}]}\n---\nGo.\n"


@pytest.fixture
def steady(tmp_path: Path) -> ContextManager:
    """A manager that ran the one-turn skill once (catalog, validators, sandbox pool ready)."""
    (tmp_path / "once.skill.md").write_text(ONCE)
    cm = ContextManager([tmp_path], cwd=tmp_path, env=False, project=False, user=False, entry_points=False)
    assert cm.invoke_sync("once") == 1
    return cm


def test_a_one_turn_run_resolves_the_cascade_three_times_at_most(steady, monkeypatch):
    # the run's settings, its code skill's middleware list, the permission check's call
    # layer; the source of model.guardrails only when there are guardrails
    resolves = []
    resolve = config.Cascade.resolve
    monkeypatch.setattr(config.Cascade, "resolve", lambda self, *a: resolves.append(a) or resolve(self, *a))
    assert steady.invoke_sync("once") == 1
    assert 0 < len(resolves) <= 3, [(skill.name if skill else None) for skill, *_ in resolves]


def test_consecutive_invoke_sync_runs_each_take_a_pooled_sandbox(steady):
    """``invoke_sync`` closes its event loop when its call ends; the pool refills on its
    own thread, so no run instantiates a sandbox on its own path."""
    from agent_apps.agent import executor

    pool = executor._POOL
    assert pool is not None
    pooled, fresh = pool.stats.pooled, pool.stats.fresh
    for _ in range(20):
        assert steady.invoke_sync("once") == 1
    assert (pool.stats.pooled - pooled, pool.stats.fresh - fresh) == (20, 0)
