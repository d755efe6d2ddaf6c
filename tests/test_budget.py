"""The execution budget at its edges (agent_apps.budget, docs/supervision.md), through real
agent runs with the scripted provider: a turn may not start once a limit is used up
exactly, a run that ends exactly at a limit is done, and a turn that goes past one stops
the run at once. Every limit of ``model.budget`` that counts model usage, and the tree's."""

from __future__ import annotations

import pytest

from agent_apps import BudgetExceeded

pytestmark = pytest.mark.anyio

#: One dollar per token of each kind, so a cost budget counts like a token budget.
PRICES = {"prices": {"dollar-model": {"input": 1_000_000, "output": 1_000_000}}}

#: limit -> the usage of a turn that spends ``n`` of it.
KINDS = {
    "tokens": lambda n: {"input_tokens": n - n // 2, "output_tokens": n // 2},
    "input_tokens": lambda n: {"input_tokens": n, "output_tokens": 0},
    "output_tokens": lambda n: {"input_tokens": 0, "output_tokens": n},
    "cost_usd": lambda n: {"input_tokens": n // 2, "output_tokens": n - n // 2},
}


async def run(cm, turns, limit, amount, **args):
    config = {"agent": "agent-scripted", "script": turns, "budget": {limit: amount}}
    if limit == "cost_usd":
        config["model_id"] = "dollar-model"
    call = {"prompt": "Test.", "name": "spender", "config": config, **args}
    return await cm.invoke("agent", call, config=PRICES)


def statuses(cm):
    run_id = cm.state.runs.list(limit=1)[0].id
    return {a.name: (a.status, a.report["step_count"]) for a in cm.state.runs.agents(run_id)}


@pytest.mark.parametrize("limit", sorted(KINDS))
async def test_no_turn_starts_once_a_limit_is_used_up_exactly(context_manager, limit):
    turns = [{"code": "x = 1", "usage": KINDS[limit](10)}, {"text": "never"}]
    with pytest.raises(BudgetExceeded) as info:
        await run(context_manager, turns, limit, 10)
    assert (info.value.limit, info.value.allowed, info.value.used) == (f"model.budget.{limit}", 10, 10)
    assert statuses(context_manager) == {"spender": ("budget", 1)}


@pytest.mark.parametrize("limit", sorted(KINDS))
async def test_a_run_that_ends_exactly_at_a_limit_is_done(context_manager, limit):
    turns = [{"code": "x = 1", "usage": KINDS[limit](6)}, {"text": "done", "usage": KINDS[limit](4)}]
    assert await run(context_manager, turns, limit, 10) == "done"
    assert statuses(context_manager) == {"spender": ("done", 2)}


@pytest.mark.parametrize("limit", sorted(KINDS))
async def test_a_turn_past_a_limit_stops_the_run_even_as_its_last(context_manager, limit):
    turns = [{"text": "done", "usage": KINDS[limit](11)}]
    with pytest.raises(BudgetExceeded) as info:
        await run(context_manager, turns, limit, 10)
    assert (info.value.allowed, info.value.used) == (10, 11)


async def test_turns_budget_at_its_edge(context_manager):
    two = [{"code": "x = 1"}, {"text": "done"}]
    assert await run(context_manager, two, "turns", 2) == "done"
    with pytest.raises(BudgetExceeded, match=r"model.budget.turns = 2 reached \(2 used; turn 3 refused\)"):
        await run(context_manager, [{"code": "x = 1"}, {"code": "x = 2"}, {"text": "never"}], "turns", 2)


async def test_a_parents_limit_used_up_exactly_stops_the_child_and_the_parent(context_manager):
    """The child spends the tree's last token in its first turn: its second turn is refused
    by the parent's ledger, and the parent may not start another turn either."""
    script = [{"code": "x = 1", "usage": KINDS["tokens"](10)}, {"text": "never"}]
    child = {"prompt": "c", "name": "child", "config": {"agent": "agent-scripted", "script": script}}
    code = f"try:\n    await ctx.manager.invoke('agent', {child!r})\nexcept Exception as e:\n    print(e)"
    turns = [{"code": code, "usage": {"input_tokens": 0, "output_tokens": 0}}, {"text": "never"}]
    with pytest.raises(BudgetExceeded) as info:
        await run(context_manager, turns, "tokens", 10, allowed_tools="agent")
    assert (info.value.allowed, info.value.used) == (10, 10)
    assert statuses(context_manager) == {"spender": ("budget", 1), "child": ("budget", 1)}
    run_id = context_manager.state.runs.list(limit=1)[0].id
    child_error = {a.name: a.report for a in context_manager.state.runs.agents(run_id)}["child"]["error"]
    assert child_error["message"].endswith("(10 used; the budget of agent 'spender')")
