"""``cm.batch(...)`` in this process: results in completion order, bad inputs and failed
runs as their own errors, the concurrency bound, stopping early, the default bound."""

from __future__ import annotations

import asyncio
import os

import pytest

from agent_apps.batch import BatchInput, default_concurrency, runner
from agent_apps.testing.plugin import hermetic_manager

pytestmark = pytest.mark.anyio


@pytest.fixture
def cm(skills, tmp_path):
    return hermetic_manager([skills], tmp_path)


async def collect(batch):
    async with batch:
        return [result async for result in batch]


async def test_every_input_gets_one_result_bad_ones_their_error(cm):
    inputs = [{"text": "a b"}, {"text": 3}, ["not", "an", "object"], {"text": "x y z"}, {}]
    results = await collect(cm.batch("count", inputs, concurrency=2))
    by = {r.index: r for r in results}
    assert sorted(by) == [0, 1, 2, 3, 4]
    assert (by[0].ok, by[0].result, by[3].result) == (True, 2, 3)
    assert by[1].error["type"] == "ArgsInvalid" and by[1].error["path"] == "text"
    assert by[2].error == {"type": "InputInvalid", "message": "input 2: expected a JSON object of args, got an array"}
    assert by[4].error["type"] == "ArgsInvalid" and "'text' is a required property" in by[4].error["message"]
    assert by[0].run_id and by[0].run_id != by[3].run_id and by[2].run_id is None


async def test_two_turn_agent_runs_are_recorded_under_their_run_ids(cm):
    inputs = [{"text": "w " * n} for n in range(12)]
    results = await collect(cm.batch("count-agent", inputs, concurrency=4))
    assert sorted((r.index, r.result) for r in results) == [(n, n) for n in range(12)]
    runs = {run.id: run for run in cm.state.runs.list(limit=100)}
    for result in results:
        assert runs[result.run_id].status == "done" and runs[result.run_id].name == "count-agent"


async def test_a_failing_run_is_its_error_and_the_batch_goes_on(cm, write_skill):
    write_skill("flaky", """
        frontmatter = {"params": {"type": "object"}}
        async def main(ctx, args):
            if args.get("boom"):
                raise RuntimeError("boom " + str(args["boom"]))
            return "fine"
    """)
    results = await collect(cm.batch("flaky", [{}, {"boom": 1}, {}], concurrency=3))
    by = {r.index: r for r in results}
    assert by[0].result == by[2].result == "fine"
    assert by[1].error["type"] == "SkillFailed" and "boom 1" in by[1].error["message"]


async def test_concurrency_bound_is_reached_and_never_exceeded(cm):
    n = 5
    results = await collect(cm.batch("gate", [{"n": n}] * (3 * n), concurrency=n))
    assert len(results) == 3 * n and all(r.ok for r in results)
    assert max(r.result for r in results) == n  # n at once, never n + 1


async def test_results_come_in_completion_order_with_explicit_indexes(cm):
    inputs = [BatchInput(10, {"s": 0.5}), BatchInput(20, {"s": 0}), BatchInput(30, error="bad line")]
    results = await collect(cm.batch("slow", inputs, concurrency=3))
    assert [r.index for r in results] == [20, 30, 10]
    assert results[1].error == {"type": "InputInvalid", "message": "bad line"}


async def test_async_inputs_are_read_as_runs_finish(cm):
    read = []

    async def inputs():
        for n in range(6):
            read.append(n)
            yield {"n": 1}

    async with cm.batch("gate", inputs(), concurrency=2) as batch:
        first = await anext(aiter(batch))
        assert first.ok and len(read) <= 3  # two in flight, one more once the first finished
        rest = [r async for r in batch]
    assert len(rest) == 5


async def test_leaving_early_cancels_the_runs_in_flight(cm, write_skill, tmp_path):
    marker = tmp_path / "cancelled"
    write_skill("hang", f"""
        import asyncio, pathlib
        frontmatter = {{"params": {{"type": "object"}}}}
        async def main(ctx, args):
            if args.get("quick"):
                return 1
            ctx.signal.add_callback(lambda reason: pathlib.Path({str(marker)!r}).write_text(reason))
            await asyncio.sleep(60)
    """)
    async with cm.batch("hang", [{"quick": True}, {}, {}], concurrency=3) as batch:
        async for result in batch:
            assert result.index == 0
            break
    assert marker.exists()


async def test_stopped_agent_is_a_failure_with_its_partial_result(cm):
    results = await collect(cm.batch("count-agent", [{"text": "a b"}], config={"model": {"max_turns": 1}}))
    (result,) = results
    assert not result.ok and result.error["type"] == "Stopped" and result.error["status"] == "max_turns"


async def test_every_run_of_a_batch_serves_its_tenant(cm):
    results = await collect(cm.batch("count-agent", [{"text": "a b"}, {"text": "c"}], tenant="acme"))
    assert all(r.ok for r in results)
    assert {run.id for run in cm.state.runs.list(tenant="acme")} == {r.run_id for r in results}


async def test_unknown_skill_and_bad_options_fail_before_any_run(cm):
    from agent_apps.errors import SkillNotFound

    with pytest.raises(SkillNotFound):
        cm.batch("no-such-skill", [{}])
    with pytest.raises(ValueError, match="concurrency"):
        cm.batch("count", [{}], concurrency=0)
    with pytest.raises(ValueError, match="tenant: "):
        cm.batch("count", [{}], tenant="bad tenant\n")


def test_default_concurrency_is_per_cpu_bounded_by_memory(cm, monkeypatch):
    skill = cm.get("count")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    monkeypatch.setattr(runner, "available_memory", lambda: None)
    assert default_concurrency(cm, skill) == 3 * runner.RUNS_PER_CPU
    monkeypatch.setattr(runner, "available_memory", lambda: 1000 * 2**20)  # 1000 MiB: 3 runs of 256 + 32 MiB
    assert default_concurrency(cm, skill) == 3
    monkeypatch.setattr(runner, "available_memory", lambda: 0)
    assert default_concurrency(cm, skill) == 1


def test_available_memory_reads_this_machine():
    available = runner.available_memory()
    assert available is None or available > 0


async def test_batch_needs_no_event_loop_tricks(cm):
    """Two batches of one manager at once share its process (and sandbox pool)."""
    one, two = await asyncio.gather(
        collect(cm.batch("count-agent", [{"text": "a"}] * 3, concurrency=2)),
        collect(cm.batch("count-agent", [{"text": "a b"}] * 3, concurrency=2)),
    )
    assert [r.result for r in one] == [1, 1, 1] and [r.result for r in two] == [2, 2, 2]
