"""A run's setup (``Core._setup``): the guest gets only what it does not hold yet (limits,
memory seed, served call, clock), and every run still sees exactly what it was given."""

from __future__ import annotations

import threading

import pytest

from agent_apps.sandbox import SandboxLimits

pytestmark = pytest.mark.anyio


@pytest.fixture
def setups(monkeypatch):
    """The setup argument of every run started on this thread (not the pool's refills)."""
    from agent_apps.sandbox import _engine

    seen: list[str] = []

    class Recording(_engine.StringCall):
        def __init__(self, func, store, context, code, setup):
            if threading.current_thread() is threading.main_thread():
                seen.append(setup)
            super().__init__(func, store, context, code, setup)

    monkeypatch.setattr(_engine, "StringCall", Recording)
    return seen


async def test_a_pooled_sandbox_with_what_its_instance_holds_sends_no_setup(setups):
    from agent_apps.sandbox import SandboxPool

    async with SandboxPool(size=2) as pool:
        await pool.wait_ready()
        empty = await pool.acquire(memory={}, limits=SandboxLimits(timeout=7, memory_mb=128))
        seeded = await pool.acquire(memory={"k": 1})
        try:
            assert (await empty.run("[memory, target]")).value == [{}, None]
            assert (await seeded.run("memory")).value == {"k": 1}
        finally:
            await empty.close()
            await seeded.close()
    assert setups == ["", '{"memory":{"k": 1}}']


async def test_limits_the_guest_does_not_hold_are_sent_and_hold(setups):
    from agent_apps.sandbox import SandboxPool

    async with SandboxPool(size=1) as pool:
        await pool.wait_ready()
        sb = await pool.acquire(limits=SandboxLimits(output_kb=1))
        try:
            res = await sb.run("print('x' * 5000)")
            assert "output truncated" in res.output and len(res.output) < 1500
            assert "output truncated" in (await sb.run("print('x' * 5000)")).output
        finally:
            await sb.close()
    assert setups[0].startswith('{"limits":{"output":1024,') and setups[1] == ""


async def test_a_target_is_sent_even_with_an_empty_memory(setups):
    from agent_apps.sandbox import SandboxPool

    async with SandboxPool(size=1) as pool:
        await pool.wait_ready()
        sb = await pool.acquire(target={"skill": "echo", "args": {"a": 1}})
        try:
            assert (await sb.run("[target.skill, target.args, memory]")).value == ["echo", {"a": 1}, {}]
        finally:
            await sb.close()


async def test_an_instance_that_ran_code_is_seeded_again_even_with_an_empty_memory(host):
    from agent_apps.sandbox import Sandbox
    from agent_apps.sandbox._host import new_core

    core = await new_core()
    first = Sandbox(core, memory={}, call_host=host)
    await first.run("memory['left'] = 1")
    second = Sandbox(core, memory={}, call_host=host)
    try:
        assert (await second.run("memory")).value == {}
    finally:
        await second.close()


async def test_a_run_without_a_clock_after_one_with_a_clock_reads_the_real_clock(sb):
    fixed = await sb.run("import time\ntime.time()", clock={"time": 1000.0, "seed": 1})
    assert fixed.value == 1000.0
    real = await sb.run("import time\ntime.time()")
    assert real.value > 1_000_000_000
    again = await sb.run("import time\ntime.time()", clock={"time": 2000.0, "seed": 1})
    assert again.value == 2000.0
    batch = await sb.run_batch(["import time\ntime.time()"])
    assert batch[0].value > 1_000_000_000



async def test_a_warmed_instance_holds_nothing_of_its_warm_up(setups):
    """The warm-up seeds ``memory`` and runs code; what it leaves must be a new instance's
    state, with no run after it to reset it: the next run sends no setup and sees none of it."""
    from agent_apps.sandbox._core import Core

    core = Core()
    core.instantiate()
    core.warm_up()
    try:
        assert core.memory_json == "{}"
        core.seed("{}", None)
        report = await core.run("[memory, target, 'value' in globals()]", 5.0)
        assert report["value"] == [{}, None, False]
        assert core.memory_json == "{}"
    finally:
        core.close()
    assert setups[-1] == ""
