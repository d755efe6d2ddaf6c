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


def test_a_one_turn_run_reads_the_cascades_layers_only_to_resolve_it(steady, monkeypatch):
    # a layer's files are checked by their mtime each time: with no model.workspace in
    # any layer, the run's settings do not read the layers again to find where it was set
    read = []
    layers = config.Cascade.layers
    monkeypatch.setattr(config.Cascade, "layers", lambda self, *a: read.append(a) or layers(self, *a))
    resolves = []
    resolve = config.Cascade.resolve
    monkeypatch.setattr(config.Cascade, "resolve", lambda self, *a: resolves.append(a) or resolve(self, *a))
    assert steady.invoke_sync("once") == 1
    assert len(read) == len(resolves), [(skill.name if skill else None) for skill, *_ in read]


def test_a_one_turn_run_draws_its_ids_and_refs_from_a_buffer_not_one_system_call_each(steady, monkeypatch):
    # each os.urandom releases the GIL on the event loop's thread; the run's ids, callback
    # refs and seeds come from one buffer (agent_apps._random), refilled 4 KiB at a time
    import os

    from agent_apps import _random

    asked = []
    urandom = os.urandom
    monkeypatch.setattr(os, "urandom", lambda size: asked.append(size) or urandom(size))
    for _ in range(3):
        assert steady.invoke_sync("once") == 1
    assert [size for size in asked if size < _random.REFILL] == [], asked
