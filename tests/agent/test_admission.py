"""Admission control: bounded live sandboxes and model calls, priority, no deadlock."""

from __future__ import annotations

import asyncio
import json

import pytest

from agent_apps import Cancelled, ContextManager, Signal, admission, machine
from agent_apps.admission import MB_PER_SANDBOX, SANDBOXES_PER_CPU, Admission, Gate, default_sandboxes

pytestmark = pytest.mark.anyio


def manager(tmp_path, skills_path, admission: str) -> ContextManager:
    (tmp_path / "agent-apps.yaml").write_text(f"admission: {admission}\n")
    return ContextManager(
        [skills_path], cwd=tmp_path, home=tmp_path / "home", env=False, user=False, entry_points=False
    )


def scripted(turns, **extra):
    return {"agent": "agent-scripted", "script": turns, **extra}


# -- the default bound: derived from the machine ----------------------------------------

MB = 2**20


@pytest.mark.parametrize(
    ("cpus", "available_mb", "expected"),
    [
        (2, 16 * 1024, 2 * SANDBOXES_PER_CPU),  # the CPUs bound: 8 on 2 CPUs with memory to spare
        (16, 64 * 1024, 16 * SANDBOXES_PER_CPU),
        (16, 1024, 1024 // MB_PER_SANDBOX),  # a 1 GB container with many CPUs: memory bounds it
        (1, None, SANDBOXES_PER_CPU),  # memory unknown: CPUs alone
        (64, 10, 2),  # almost no memory left: never fewer than two
        (0, None, SANDBOXES_PER_CPU),  # a CPU count of 0 counts as one
    ],
)
def test_default_sandboxes_scale_with_cpus_bounded_by_memory(cpus, available_mb, expected):
    available = None if available_mb is None else available_mb * MB
    assert default_sandboxes(cpus, available) == expected


def test_usable_cpus_follow_affinity_and_a_cgroup_quota(tmp_path, monkeypatch):
    monkeypatch.setattr(machine.os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    assert machine.usable_cpus(tmp_path) == 8  # no cgroup files: the affinity mask
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert machine.usable_cpus(tmp_path) == 8  # no quota
    (tmp_path / "cpu.max").write_text("250000 100000\n")  # docker --cpus 2.5
    assert machine.usable_cpus(tmp_path) == 3
    (tmp_path / "cpu.max").write_text("5000 100000\n")  # a twentieth of a CPU
    assert machine.usable_cpus(tmp_path) == 1
    (tmp_path / "cpu.max").write_text("garbage\n")
    assert machine.usable_cpus(tmp_path) == 8


def test_available_memory_is_the_lower_of_the_kernel_and_a_cgroup_limit(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       32000000 kB\nMemAvailable:    8000000 kB\n")
    cgroup = tmp_path / "cgroup"
    cgroup.mkdir()
    assert machine.available_memory(meminfo, cgroup) == 8000000 * 1024
    (cgroup / "memory.max").write_text("max\n")
    (cgroup / "memory.current").write_text("1000\n")
    assert machine.available_memory(meminfo, cgroup) == 8000000 * 1024  # no limit
    (cgroup / "memory.max").write_text(f"{512 * MB}\n")
    (cgroup / "memory.current").write_text(f"{112 * MB}\n")
    assert machine.available_memory(meminfo, cgroup) == 400 * MB
    assert machine.available_memory(tmp_path / "missing", tmp_path / "missing") is None


def test_the_bound_is_derived_unless_configured(tmp_path, skills_path, monkeypatch):
    """A 1 GB container with 4 CPUs: the default is the rule's, a configured one wins."""
    monkeypatch.setattr(machine, "usable_cpus", lambda: 4)
    monkeypatch.setattr(machine, "available_memory", lambda: 1024 * MB)
    assert Admission().sandboxes.size == default_sandboxes(4, 1024 * MB) == 1024 // MB_PER_SANDBOX
    cm = ContextManager([skills_path], cwd=tmp_path, home=tmp_path / "home", env=False, user=False,
                        entry_points=False)
    assert cm.admission.sandboxes.size == 1024 // MB_PER_SANDBOX
    assert manager(tmp_path, skills_path, "{sandboxes: 3}").admission.sandboxes.size == 3
    assert admission.machine_sandboxes() == 1024 // MB_PER_SANDBOX


# -- the gate ---------------------------------------------------------------------------


async def test_waiters_are_served_by_priority_then_arrival():
    gate = Gate(1, "test")
    await gate.acquire()
    order: list[str] = []

    async def wait(name: str, priority: str) -> None:
        await gate.acquire(priority)
        order.append(name)
        gate.release()

    names = [("low-1", "low"), ("high-1", "high"), ("low-2", "low"), ("critical", "critical"), ("high-2", "high")]
    tasks = [asyncio.ensure_future(wait(n, p)) for n, p in names]
    await asyncio.sleep(0.01)
    assert gate.waiting == 5 and order == []
    gate.release()
    await asyncio.wait_for(asyncio.gather(*tasks), 5)
    assert order == ["critical", "high-1", "high-2", "low-1", "low-2"]
    assert (gate.in_use, gate.peak) == (0, 1)


async def test_a_cancelled_wait_gives_nothing_away():
    gate = Gate(1, "test")
    await gate.acquire()
    signal = Signal()
    waiter = asyncio.ensure_future(gate.acquire("normal", signal))
    await asyncio.sleep(0.01)
    signal.cancel("gave up")
    with pytest.raises(Cancelled, match="gave up"):
        await asyncio.wait_for(waiter, 5)
    gate.release()
    assert gate.in_use == 0 and gate.waiting == 0
    await asyncio.wait_for(gate.acquire(), 1)  # the slot is free for the next one


async def test_taking_a_slot_without_waiting_goes_beyond_the_bound():
    gate = Gate(1, "test")
    await gate.acquire()
    await asyncio.wait_for(gate.acquire(wait=False), 1)
    assert (gate.in_use, gate.peak) == (2, 2)


def test_model_call_sizes_per_provider():
    admission = Admission(4, {"default": 3, "agent-strands": 1})
    assert admission.model_calls("agent-strands").size == 1
    assert admission.model_calls("agent-scripted").size == 3
    assert admission.model_calls("agent-scripted") is admission.model_calls("agent-scripted")


# -- agents -----------------------------------------------------------------------------


def nested(depth: int, leaf: str) -> list[dict]:
    """The script of an agent whose code starts a sub-agent, ``depth`` levels down."""
    if depth == 0:
        return [{"code": f"ctx.manager.finish({leaf!r})"}]
    call = {"prompt": "P", "name": f"level-{depth}", "config": scripted(nested(depth - 1, leaf))}
    return [{"code": f"ctx.manager.finish(await ctx.manager.invoke('agent', {json.dumps(call)}))"}]


async def test_nested_agents_never_deadlock_on_a_pool_their_ancestors_hold(tmp_path, skills_path):
    cm = manager(tmp_path, skills_path, "{sandboxes: 2}")
    running: set[str] = set()  # outermost agents past admission (their first turn started)
    peak_roots = 0

    def watch(topic, event):
        nonlocal peak_roots
        if event["depth"] != 0:
            return
        if event["type"] == "turn-start":
            running.add(event["agent_id"])
            peak_roots = max(peak_roots, len(running))
        elif event["type"] in ("agent-complete", "agent-error"):
            running.discard(event["agent_id"])

    cm.events.subscribe("n", watch)

    async def tree(i: int) -> str:
        config = scripted(nested(2, f"tree {i}"))  # three agents, nested three deep
        return await cm.invoke("agent", {"prompt": "P", "allowed_tools": "agent", "config": config, "events": "n"})

    results = await asyncio.wait_for(asyncio.gather(*(tree(i) for i in range(5))), 120)
    assert results == [f"tree {i}" for i in range(5)]  # every tree got its own answer back
    gate = cm.admission.sandboxes
    assert peak_roots <= 2  # no more than two trees ran at once
    assert gate.in_use == 0 and gate.peak >= 3  # nested agents took slots beyond the bound instead of waiting


async def test_a_waiting_run_ends_at_its_deadline(tmp_path, skills_path):
    cm = manager(tmp_path, skills_path, "{sandboxes: 1}")
    blocker = asyncio.ensure_future(
        cm.invoke("agent", {"prompt": "P", "config": scripted([{"text": "z", "delay": 30}])})
    )
    await asyncio.sleep(0.5)
    from agent_apps import BudgetExceeded

    with pytest.raises(BudgetExceeded, match="deadline_s"):
        config = scripted([{"text": "never"}], budget={"deadline_s": 0.3})
        await asyncio.wait_for(cm.invoke("agent", {"prompt": "P", "config": config}), 10)
    blocker.cancel()
    with pytest.raises(asyncio.CancelledError):
        await blocker
    assert cm.admission.sandboxes.in_use == 0


async def test_priority_decides_who_gets_the_next_sandbox(tmp_path, skills_path):
    cm = manager(tmp_path, skills_path, "{sandboxes: 1}")
    started: list[str] = []  # who got a sandbox when: their first turn
    cm.events.subscribe("p", lambda topic, e: started.append(e["agent"]) if e["type"] == "turn-start" else None)

    def run(name: str, priority: str, turns: list[dict]):
        config = scripted(turns, priority=priority)
        return asyncio.ensure_future(cm.invoke("agent", {"prompt": "P", "name": name, "config": config, "events": "p"}))

    async def until(condition) -> None:
        """Until ``condition()`` holds: each step below waits for the one before it, not for a time."""
        while not condition():
            await asyncio.sleep(0.01)

    first = run("first", "normal", [{"text": "hold", "delay": 60}])  # holds the one sandbox until cancelled
    await asyncio.wait_for(until(lambda: started == ["first"]), 30)
    queued = [("bg", "background"), ("crit", "critical"), ("norm", "normal")]
    waiting = []

    def in_line(count):
        return lambda: cm.admission.sandboxes.waiting == count

    for name, priority in queued:  # each in the line before the next comes
        waiting.append(run(name, priority, [{"text": name}]))
        await asyncio.wait_for(until(in_line(len(waiting))), 30)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    await asyncio.wait_for(asyncio.gather(*waiting), 30)
    assert started == ["first", "crit", "norm", "bg"]


async def test_model_calls_per_provider_are_bounded(tmp_path, skills_path):
    cm = manager(tmp_path, skills_path, "{sandboxes: 10, model_calls: {agent-scripted: 2}}")
    calls = [
        cm.invoke("agent", {"prompt": "P", "config": scripted([{"text": "a", "delay": 0.2}, {"text": "b"}])})
        for _ in range(6)
    ]
    assert await asyncio.wait_for(asyncio.gather(*calls), 60) == ["a"] * 6
    gate = cm.admission.model_calls("agent-scripted")
    assert gate.peak == 2 and gate.in_use == 0
