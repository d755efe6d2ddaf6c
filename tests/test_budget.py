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


async def test_every_limit_holds_when_all_are_set(context_manager):
    everything = {"tokens": 10, "input_tokens": 100, "output_tokens": 100, "cost_usd": 100, "turns": 100,
                  "deadline_s": 3600}
    config = {"agent": "agent-scripted", "model_id": "dollar-model", "budget": everything,
              "script": [{"code": "x = 1", "usage": KINDS["tokens"](10)}, {"text": "never"}]}
    with pytest.raises(BudgetExceeded) as info:
        await context_manager.invoke("agent", {"prompt": "Test.", "config": config}, config=PRICES)
    assert info.value.limit == "model.budget.tokens"


@pytest.mark.parametrize(
    ("price", "usage"),
    [
        # the kinds a price leaves out cost nothing, however many tokens of them were used
        ({"output": 1_000_000}, {"input_tokens": 50, "output_tokens": 5, "cache_read_tokens": 50,
                                 "cache_write_tokens": 50}),
        ({"input": 1_000_000}, {"input_tokens": 5, "output_tokens": 50}),
        # the kinds a usage leaves out count as none (a provider reporting output only)
        ({"input": 1_000_000, "output": 1_000_000, "cache_read": 1_000_000, "cache_write": 1_000_000},
         {"output_tokens": 5}),
    ],
    ids=["output-priced-only", "input-priced-only", "unreported-kinds"],
)
async def test_cost_counts_what_was_priced_and_reported(context_manager, price, usage):
    config = {"agent": "agent-scripted", "model_id": "m", "budget": {"cost_usd": 5},
              "script": [{"code": "x = 1", "usage": usage}, {"text": "never"}]}
    with pytest.raises(BudgetExceeded) as info:
        await context_manager.invoke("agent", {"prompt": "Test.", "config": config}, config={"prices": {"m": price}})
    assert (info.value.limit, info.value.used) == ("model.budget.cost_usd", 5)


async def test_a_sub_agents_deadline_is_the_earliest_up_the_tree(context_manager, write_skill):
    """The child's own budget allows an hour; its parent's half second is its deadline."""
    write_skill(
        "slow-child.skill.md",
        "---\ndescription: Slow.\nmetadata:\n  model:\n    agent: agent-scripted\n    budget: {deadline_s: 3600}\n"
        "    script: [{text: zzz, delay: 30}]\n---\nWait.\n",
    )
    turns = [{"code": "await ctx.manager.invoke('slow-child')"}, {"text": "never"}]
    with pytest.raises(BudgetExceeded) as info:
        await run(context_manager, turns, "deadline_s", 0.5, allowed_tools="slow-child")
    assert info.value.limit == "model.budget.deadline_s" and 0.5 <= info.value.used < 3600
    run_id = context_manager.state.runs.list(limit=1)[0].id
    reports = {a.name: a.report for a in context_manager.state.runs.agents(run_id)}
    assert reports["slow-child"]["deadline"] == reports["spender"]["deadline"]
    assert reports["slow-child"]["status"] == "budget"


async def test_a_run_cancelled_before_its_deadline_is_cancelled_not_over_budget(context_manager):
    import asyncio

    from agent_apps import Cancelled, Signal

    signal = Signal()
    config = {"agent": "agent-scripted", "budget": {"deadline_s": 3600}, "script": [{"text": "zzz", "delay": 30}]}
    task = asyncio.ensure_future(
        context_manager.invoke("agent", {"prompt": "Test.", "name": "spender", "config": config}, signal=signal)
    )
    for _ in range(200):  # until the run is recorded as started
        await asyncio.sleep(0.05)
        if context_manager.state.runs.list(limit=1):
            break
    signal.cancel()
    with pytest.raises(Cancelled):
        await asyncio.wait_for(task, 30)
    assert statuses(context_manager) == {"spender": ("cancelled", 0)}


# -- values that would be no limit at all -----------------------------------------------


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1, 0])
@pytest.mark.parametrize("key", ["cost_usd", "deadline_s"])
async def test_a_budget_value_that_would_be_no_limit_is_refused(context_manager, key, value):
    from agent_apps import ConfigError

    config = {"agent": "agent-scripted", "model_id": "dollar-model", "script": [{"text": "hi"}]}
    call = {**PRICES, "model": {"budget": {key: value}}}  # a call's config= may hold what JSON args may not
    with pytest.raises(ConfigError, match=rf"model.budget.{key} must be a number > 0, not {value!r}"):
        await context_manager.invoke("agent", {"prompt": "Test.", "config": config}, config=call)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1])
async def test_a_price_must_be_a_finite_number_of_dollars(context_manager, value):
    from agent_apps import ConfigError

    config = {"agent": "agent-scripted", "model_id": "m", "budget": {"cost_usd": 1}, "script": [{"text": "hi"}]}
    with pytest.raises(ConfigError, match=rf"prices.m.input must be a number >= 0, not {value!r}"):
        await context_manager.invoke("agent", {"prompt": "Test.", "config": config},
                                     config={"prices": {"m": {"input": value, "output": 1}}})


async def test_zero_is_a_price_and_a_depth(context_manager):
    """A kind priced 0 costs nothing; ``max_depth: 0`` is an agent that may start none."""
    usage = {"input_tokens": 7, "output_tokens": 5}
    config = {"agent": "agent-scripted", "model_id": "m", "budget": {"cost_usd": 5},
              "script": [{"code": "x = 1", "usage": usage}, {"text": "never"}]}
    with pytest.raises(BudgetExceeded) as info:
        await context_manager.invoke("agent", {"prompt": "Test.", "config": config},
                                     config={"prices": {"m": {"input": 0, "output": 1_000_000}}})
    assert info.value.used == 5
    child = {"prompt": "c", "config": {"agent": "agent-scripted", "script": [{"text": "hi"}]}}
    code = f"try:\n    r = await ctx.manager.invoke('agent', {child!r})\nexcept Exception as e:\n    r = str(e)\n"
    script = [{"code": code + "ctx.manager.finish(r)"}]
    config = {"agent": "agent-scripted", "spawn": {"max_depth": 0}, "script": script}
    result = await context_manager.invoke("agent", {"prompt": "Test.", "allowed_tools": "agent", "config": config})
    assert "model.spawn.max_depth = 0 reached" in result


async def test_the_longest_matching_price_wins(context_manager, write_skill, skills_path):
    """Two globs match: the longer one prices the model (2.5 USD per million tokens, a
    fraction); a key YAML reads as a number names no model and breaks nothing."""
    (skills_path / "agent-apps.yaml").write_text(
        "prices:\n  '*': {input: 1.0, output: 1.0}\n  'acme-*': {input: 2.5, output: 2.5}\n  2024: {input: 9}\n"
    )
    write_skill(
        "pricey.skill.md",
        "---\ndescription: P.\nmetadata:\n  model:\n    agent: agent-scripted\n    model_id: acme-large\n"
        "    budget: {cost_usd: 2.5}\n    script:\n"
        "      - {code: x = 1, usage: {input_tokens: 1000000, output_tokens: 0}}\n      - {text: never}\n---\nGo.\n",
    )
    with pytest.raises(BudgetExceeded) as info:
        await context_manager.invoke("pricey")
    assert info.value.used == 2.5


async def test_a_bad_value_names_the_file_and_line_that_set_it(context_manager, write_skill, skills_path):
    """The skill's metadata sets the rest of its model config; the error still names the
    directory file that holds the bad value."""
    config = skills_path / "agent-apps.yaml"
    config.write_text("model:\n  priority: high\n  spawn:\n    max_agents: 0\n")
    write_skill("task.skill.md", "---\ndescription: T.\nmetadata:\n  model:\n    agent: agent-scripted\n"
                "    script: [{text: hi}]\n---\nDo it.\n")
    from agent_apps import ConfigError

    with pytest.raises(ConfigError) as info:
        await context_manager.invoke("task")
    assert str(info.value).startswith(f"{config}:4: model.spawn.max_agents must be a whole number > 0, not 0")
