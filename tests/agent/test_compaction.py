"""Compaction during a long run: at the seed's threshold, before a model call, the window
the model is sent is compacted (the provider keeps its conversation); the compaction is
journaled, so a resumed run sends the same windows without summarizing again."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_apps import ApprovalPending, ConfigError, ContextManager

from .conftest import HARNESSES

pytestmark = pytest.mark.anyio

BIG = "x" * 2000  # about 500 tokens a tool result, as many its call
SUMMARY = json.dumps({"summary": "The agent printed big blocks.", "facts": ["Big blocks are 2000 x's."]})
#: 6,000 tokens of context, 500 kept free: past 70% of (6,000 - system prompt - 500) the
#: window is compacted (about every other turn here, each turn adding 1,000 tokens).
WINDOW = {"context_window": 6_000, "compaction": {"reserve": 500}}


def turns(blocks: int, *last: dict[str, Any]) -> list[dict[str, Any]]:
    """A model that prints a big block a turn, then does ``last`` (or ends)."""
    blocks_printed = [{"text": f"Block {n}.", "code": f"print('{BIG}')"} for n in range(blocks)]
    return blocks_printed + list(last or [{"text": "Done."}])


def received(trace: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the model was sent at each model call (agent-scripted's echo), in order."""
    return [e["response"]["meta"]["received"] for e in trace if e["type"] == "model-response"]


def conversation(n: int) -> list[dict[str, Any]]:
    """The provider's whole conversation at its n-th model call (one block a turn)."""
    out: list[dict[str, Any]] = [{"role": "user", "text": "Print big blocks."}]
    for k in range(1, n):
        call = {"id": "", "name": "invoke", "input": {"code": f"print('{BIG}')"}}
        out += [{"role": "assistant", "text": f"Block {k - 1}.", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "", "name": "invoke", "text": BIG, "error": False}]  # fmt: skip
    return out


def same(sent: list[dict[str, Any]], expected: list[dict[str, Any]]) -> bool:
    """Messages alike but for the call ids (random per run)."""

    def plain(m: dict[str, Any]) -> dict[str, Any]:
        out = {**m, "tool_calls": [{**c, "id": ""} for c in m["tool_calls"]]} if m.get("tool_calls") else dict(m)
        if out["role"] == "tool":
            out["tool_call_id"] = ""
        return out

    return [plain(m) for m in sent] == [plain(m) for m in expected]


async def run(cm: ContextManager, script: list[dict[str, Any]], *, summarizer: str = SUMMARY, **options: Any) -> Any:
    model = {"agent": "agent-scripted", "script": script, "echo": True, **WINDOW, **options.pop("model", {})}
    call = {"prompt": "Test.", "user_message": "Print big blocks.", "config": model}
    layer = {**options.pop("config", {})}
    layer["model"] = {"compaction": {"model": {"script": [{"text": summarizer}]}}, **layer.get("model", {})}
    return await cm.invoke("agent", call, config=layer, **options)


def last_agent(cm: ContextManager) -> Any:
    return cm.state.runs.agents(cm.state.runs.list()[0].id)[-1]


async def test_a_long_run_is_compacted_before_the_call_that_would_pass_the_threshold(context_manager, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    assert await run(context_manager, turns(6), model={"workspace": str(workspace)}) == "Done."
    agent = last_agent(context_manager)
    calls = received(agent.trace)
    compactions = agent.report["compactions"]
    assert [c["turn"] for c in compactions] == [5, 7] and all(c["summarized"] for c in compactions)
    system = -(-len(calls[0]["system"]) // 4)
    trigger = int((6_000 - system - 500) * 0.7)
    for n, sent in enumerate((c["messages"] for c in calls), 1):
        whole = conversation(n)
        if n < 5:  # the whole conversation, until it would pass the threshold ...
            assert same(sent, whole) and sum(len(str(m)) for m in whole) // 4 < trigger + 200
        else:  # ... then the summary and the newest messages, the last exchange always among them
            assert sent[0] == {"role": "summary", "text": "The agent printed big blocks."}
            assert same(sent[1:], whole[-(len(sent) - 1) :]) and len(sent) < len(whole)
            assert sent[1]["role"] == "assistant"  # never a result whose call was cut off
    # the facts went to MEMORY.md; the report and the trace say what was done
    assert (workspace / "MEMORY.md").read_text().count("- Big blocks are 2000 x's.") == 2
    traced = [{k: v for k, v in e.items() if k not in ("type", "timestamp")} for e in agent.trace]
    assert [t for t, e in zip(traced, agent.trace, strict=True) if e["type"] == "compaction"] == compactions
    assert compactions[0]["removed"] == 5 and compactions[0]["facts"] == 1  # the user's message and two exchanges


async def test_facts_are_never_appended_through_a_memory_md_the_policy_refuses(context_manager, tmp_path):
    workspace, elsewhere = tmp_path / "ws", tmp_path / "bashrc"
    workspace.mkdir()
    elsewhere.write_text("export PATH=/usr/bin\n")
    (workspace / "MEMORY.md").symlink_to(elsewhere)
    assert await run(context_manager, turns(6), model={"workspace": str(workspace)}) == "Done."
    compactions = last_agent(context_manager).report["compactions"]
    assert len(compactions) == 2 and all("memory_file" not in c for c in compactions)
    refused = [c["memory_file_refused"] for c in compactions]
    assert all("MEMORY.md: leads outside its folder" in r for r in refused)
    assert all(r.endswith("the facts were not written to it") for r in refused)
    assert elsewhere.read_text() == "export PATH=/usr/bin\n"
    # a MEMORY.md in a path the policy denies is refused the same way
    (workspace / "MEMORY.md").unlink()
    (workspace / "MEMORY.md").write_text("- kept\n")
    security = {"security": {"denied_paths": ["*/MEMORY.md"]}}
    assert await run(context_manager, turns(6), model={"workspace": str(workspace)}, config=security) == "Done."
    compactions = last_agent(context_manager).report["compactions"]
    assert all("inside denied path" in c["memory_file_refused"] for c in compactions)
    assert (workspace / "MEMORY.md").read_text() == "- kept\n"


async def test_no_compaction_under_the_threshold_or_when_switched_off(context_manager):
    assert await run(context_manager, turns(2)) == "Done."
    agent = last_agent(context_manager)
    assert "compactions" not in agent.report
    assert all(same(c["messages"], conversation(n)) for n, c in enumerate(received(agent.trace), 1))
    assert await run(context_manager, turns(6), model={"compaction": {"reserve": 500, "during_run": False}}) == "Done."
    agent = last_agent(context_manager)
    assert "compactions" not in agent.report and same(received(agent.trace)[-1]["messages"], conversation(7))
    with pytest.raises(ConfigError, match="model.compaction.during_run must be true or false"):
        await run(context_manager, turns(1), model={"compaction": {"during_run": "yes"}})


async def test_a_resumed_run_sends_the_windows_it_sent_before_without_summarizing_again(context_manager):
    ask = {"security": {"mode": "unattended", "policy": {"unattended": {"ask": ["file-write"]}}}}
    write = {"text": "Writing.", "code": "await ctx.manager.invoke('file-write', {'path': 'out.txt', 'content': 'x'})"}
    with pytest.raises(ApprovalPending) as info:
        await run(context_manager, turns(4, write, {"text": "Done."}), config=ask)
    run_id = info.value.run_id
    first = context_manager.state.runs.agents(run_id)[0]
    assert [c["turn"] for c in first.report["compactions"]] == [5]  # the write's turn
    assert [e.key for e in context_manager.state.journal.entries(run_id) if e.kind == "compaction"] == ["k.1"]
    before = received(first.trace)[-1]["messages"]
    assert before[0]["role"] == "summary"

    context_manager.approve(run_id)
    # resumed with a summarizer that would say something else: it is not asked
    other = {**ask, "model": {"compaction": {"model": {"script": [{"text": "NOT THIS SUMMARY"}]}}}}
    assert await context_manager.resume(run_id, config=other) == "Done."
    resumed = context_manager.state.runs.agents(run_id)[1]
    live = [e for e in resumed.trace if e["type"] == "model-response" and not e["replayed"]]
    assert [e["turn"] for e in live] == [6]
    window = live[0]["response"]["meta"]["received"]["messages"]
    assert window[: len(before)] == before and len(window) == len(before) + 2  # what it sent, and what came since
    assert "compactions" not in resumed.report


async def test_a_bad_context_window_is_refused_before_the_first_turn(context_manager):
    with pytest.raises(ConfigError, match="model.context_window must be a positive number of tokens"):
        await run(context_manager, turns(1), model={"context_window": 0})


@pytest.mark.skipif("agent-strands" not in HARNESSES, reason="needs the strands extra")
async def test_agent_strands_sends_the_compacted_window_to_bedrock(context_manager):
    from agent_apps.testing.conformance import strands_bedrock

    with strands_bedrock() as harness:
        # four blocks, then the summarizer's answer (the same fake model plays it), then the end
        config = harness.config([*turns(4)[:-1], {"text": SUMMARY}, {"text": "Done."}])
        call = {"prompt": "Test.", "user_message": "Print big blocks.", "config": {**config, **WINDOW}}
        assert await context_manager.invoke("agent", call) == "Done."
        requests = harness.fake.requests
    (compaction,) = last_agent(context_manager).report["compactions"]
    assert compaction["turn"] == 5 and compaction["summarized"]
    summarizing, after = requests[4].body, requests[5].body
    assert "You compact the earlier part of a conversation" in json.dumps(summarizing["system"])
    first = after["messages"][0]
    assert first["role"] == "user" and "The agent printed big blocks." in json.dumps(first)
    assert len(after["messages"]) < len(requests[3].body["messages"]) + 2
