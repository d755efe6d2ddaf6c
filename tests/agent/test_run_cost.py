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


def test_a_one_turn_run_resolves_the_cascade_once(steady, monkeypatch):
    # the run's settings; its code skill's middleware list and security config are
    # cached on the skill, kept from the manager's first run of this agent
    # (agent/executor.py code_skill); the source of model.guardrails only when there
    # are guardrails
    resolves = []
    resolve = config.Cascade.resolve
    monkeypatch.setattr(config.Cascade, "resolve", lambda self, *a: resolves.append(a) or resolve(self, *a))
    assert steady.invoke_sync("once") == 1
    assert len(resolves) == 1, [(skill.name if skill else None) for skill, *_ in resolves]


def test_a_managers_code_skills_are_kept_per_agent_and_allowed_tools_until_it_reloads(steady):
    from agent_apps.agent.executor import CODE_SKILLS, code_skill

    skill = code_skill(steady, "once", None)
    assert code_skill(steady, "once", None) is skill
    assert code_skill(steady, "once", "noop") is not skill and code_skill(steady, "other", None) is not skill
    assert skill.allowed_tools is None and code_skill(steady, "once", "noop").allowed_tools == "noop"
    for n in range(CODE_SKILLS):  # sub-agents with allowed-tools of their own: kept up to a bound
        code_skill(steady, "once", f"tool-{n}")
    assert len(steady._code_skills) <= CODE_SKILLS and code_skill(steady, "once", None) is not skill
    skill = code_skill(steady, "once", None)
    steady.reload()
    assert code_skill(steady, "once", None) is not skill


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


def test_concurrent_runs_of_one_agent_share_its_code_skill_and_each_runs_its_own_code(tmp_path):
    import asyncio

    from agent_apps.agent.executor import code_skill

    (tmp_path / "echo.skill.py").write_text(
        'frontmatter = {"params": {"type": "object"}}\nasync def main(ctx, args):\n    return args\n'
    )
    cm = ContextManager([tmp_path], cwd=tmp_path, env=False, project=False, user=False, entry_points=False)
    turn = (
        "r = await ctx.manager.invoke('echo', {'n': memory['n']})\n"
        "await asyncio.sleep(0.01)\n"
        "ctx.manager.finish([memory['n'], r['n']])"
    )

    async def one(n: int) -> object:
        config = {"agent": "agent-scripted", "script": [{"code": turn}]}
        return await cm.invoke("agent", {"prompt": "p", "memory": {"n": n}, "name": "same", "config": config})

    async def many() -> list[object]:
        return list(await asyncio.gather(*(one(n) for n in range(6))))

    assert asyncio.run(many()) == [[n, n] for n in range(6)]
    assert [key for key in cm._code_skills if key[0] == "same"] == [("same", None)]
    assert code_skill(cm, "same", None).allowed_tools is None
