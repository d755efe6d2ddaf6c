"""The model's reasoning (extended thinking) is kept with its assistant message in the
session (seed 004) and in the run report's step, with a short summary; a run that keeps
no content keeps only its length."""

from __future__ import annotations

import pytest

from agent_apps.state.messages import reasoning_summary

pytestmark = pytest.mark.anyio

THOUGHT = "The user wants a sum. I will add the numbers in code and check the result twice."


def test_a_summary_is_the_first_sentence_and_the_whole_length():
    assert reasoning_summary(THOUGHT) == f"The user wants a sum. ({len(THOUGHT)} characters)"
    assert reasoning_summary("Short.") == "Short."
    assert reasoning_summary("  \n ") == ""
    long = "x" * 400
    assert reasoning_summary(long) == "x" * 159 + "… (400 characters)"


async def test_reasoning_is_kept_with_the_assistant_message_and_in_the_report(context_manager):
    script = [{"reasoning": THOUGHT, "code": "print(1 + 2)"}, {"text": "3."}]
    call = {"user_message": "Add 1 and 2.", "config": {"agent": "agent-scripted", "script": script}}
    assert await context_manager.invoke("agent", call, session="r") == "3."
    store = context_manager.state
    assistants = [e.message for e in store.sessions.history("r").entries if e.message["role"] == "assistant"]
    assert [m.get("reasoning") for m in assistants] == [THOUGHT, None]
    run = store.runs.list(session="r")[0]
    steps = store.runs.agents(run.id)[0].report["steps"]
    assert steps[0]["reasoning"] == THOUGHT
    assert steps[0]["reasoning_summary"] == f"The user wants a sum. ({len(THOUGHT)} characters)"
    assert "reasoning" not in steps[1]


async def test_a_run_that_keeps_no_content_keeps_only_the_reasoning_length(context_manager):
    script = [{"reasoning": THOUGHT, "text": "done"}]
    config = {"agent": "agent-scripted", "script": script, "retention": "none"}
    assert await context_manager.invoke("agent", {"user_message": "x", "config": config}) == "done"
    run = context_manager.state.runs.list()[0]
    (step,) = context_manager.state.runs.agents(run.id)[0].report["steps"]
    assert step["reasoning_chars"] == len(THOUGHT) and "reasoning" not in step and "reasoning_summary" not in step


async def test_a_provider_without_reasoning_settings_runs_without_them_and_warns_once(
    context_manager, caplog, monkeypatch
):
    """agent-scripted declares no ``metadata.provider.thinking``: model.thinking is
    ignored there, with one warning naming it however many runs ask for it."""
    from agent_apps.agent import settings

    monkeypatch.setattr(settings, "_warned", set())  # what earlier tests of this process warned of
    config = {"agent": "agent-scripted", "script": [{"text": "ok"}], "thinking": {"budget_tokens": 2048}}
    with caplog.at_level("WARNING", logger="agent_apps.agent"):
        for _ in range(2):
            assert await context_manager.invoke("agent", {"config": config}) == "ok"
    warned = [r.getMessage() for r in caplog.records if "model.thinking" in r.getMessage()]
    assert warned == [
        "model.thinking is ignored: provider 'agent-scripted' has no reasoning settings (agent-strands has them)"
    ]


@pytest.mark.parametrize("budget", [100, 0, "lots", True])
async def test_a_bad_thinking_budget_is_refused_naming_the_arg(context_manager, budget):
    from agent_apps import AgentAppsError

    config = {"agent": "agent-scripted", "script": [{"text": "ok"}], "thinking": {"budget_tokens": budget}}
    with pytest.raises(AgentAppsError, match="budget_tokens"):
        await context_manager.invoke("agent", {"config": config})
