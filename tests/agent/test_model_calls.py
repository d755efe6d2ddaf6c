"""The model-call protocol (``model-call`` / ``model-response`` hook events), held for every
provider that declares it: each call is reported, a ``response`` directive replaces the
model call, ``messages``/``system`` directives change what is sent, and with
``buffer_responses`` a directive replaces the answer the provider acts on."""

from __future__ import annotations

from typing import Any

import pytest

from agent_apps import AgentAppsError
from agent_apps.agent import run as agent_run
from agent_apps.testing.conformance import StrandsBedrock

pytestmark = pytest.mark.anyio


class Interceptor:
    """Test scaffolding: an interceptor of the kind features register (journal, middleware)."""

    def __init__(self, *, call=None, response=None, needs_messages=False, changes_responses=False) -> None:
        self.needs_messages = needs_messages
        self.changes_responses = changes_responses
        self._call, self._response = call, response
        self.calls: list[dict[str, Any]] = []
        self.responses: list[dict[str, Any]] = []

    async def model_call(self, event):
        self.calls.append(dict(event))
        return self._call(event) if self._call else None

    async def model_response(self, event):
        self.responses.append(dict(event))
        return self._response(event) if self._response else None


@pytest.fixture
def intercept(monkeypatch):
    """``intercept(interceptor)``: every agent run of the test gets it."""

    def install(interceptor: Interceptor) -> Interceptor:
        original = agent_run.AgentRun.__init__

        def init(self, ctx, args):
            original(self, ctx, args)
            self.model_calls.interceptors.append(interceptor)

        monkeypatch.setattr(agent_run.AgentRun, "__init__", init)
        return interceptor

    return install


def model_requests(harness) -> int | None:
    """How many requests reached the model (for providers that can tell)."""
    return len(harness.fake.requests) if isinstance(harness, StrandsBedrock) else None


async def test_every_model_call_is_reported(harness, run_agent, intercept):
    spy = intercept(Interceptor())
    turns = [{"text": "Counting.", "code": "print('ran')"}, {"text": "Done."}]
    # compaction during the run asks for the messages (docs/sessions.md): switched off, none does
    assert await run_agent(harness, turns, config={"compaction": {"during_run": False}}) == "Done."
    assert [(c["turn"], c["attempt"]) for c in spy.calls] == [(1, 1), (2, 1)]
    assert "messages" not in spy.calls[0]  # only when asked for
    first, second = (r["response"] for r in spy.responses)
    assert first["text"] == "Counting." and first["stop_reason"] == "tool_use"
    ((call),) = first["tool_calls"]
    assert call["name"] == "invoke" and call["input"] == {"code": "print('ran')"} and call["id"]
    assert second["text"] == "Done." and second["tool_calls"] == [] and second["stop_reason"] == "end_turn"
    assert all(r["replayed"] is False and r["latency_ms"] >= 0 for r in spy.responses)


async def test_a_response_directive_replaces_the_model_call(harness, run_agent, intercept, context_manager):
    replayed = {
        "text": "From the journal.",
        "tool_calls": [{"id": "call-journal-1", "name": "invoke", "input": {"code": "print('replayed code ran')"}}],
        "usage": {"input_tokens": 11, "output_tokens": 3},
        "stop_reason": "tool_use",
        "meta": {"script_position": 0},
    }
    spy = intercept(Interceptor(call=lambda e: {"response": replayed} if e["turn"] == 1 else None))
    events: list[dict[str, Any]] = []
    context_manager.events.subscribe("mc", lambda topic, e: events.append(e))
    # the model itself only has the second turn to say
    assert await run_agent(harness, [{"text": "Live again."}], events="mc") == "Live again."
    assert [r["replayed"] for r in spy.responses] == [True, False]
    assert spy.responses[0]["response"]["text"] == "From the journal."
    (result,) = [e for e in events if e["type"] == "tool-result"]
    assert result["result"] == "replayed code ran"  # the replayed tool call ran as a live one
    assert model_requests(harness) in (None, 1)


async def test_messages_and_system_directives_change_what_is_sent(harness, run_agent, intercept):
    def redact(event):
        assert event["system"].startswith("You are a test agent.")
        (user,) = [m for m in event["messages"] if m["role"] == "user"]
        return {"messages": [{**user, "text": user["text"].replace("secret", "[masked]")}], "system": "Short."}

    spy = intercept(Interceptor(call=redact, needs_messages=True))
    result = await run_agent(harness, [{"text": "ok"}], user_message="my secret plan", config={"echo": True})
    assert result == "ok"
    assert spy.calls[0]["messages"] == [{"role": "user", "text": "my secret plan"}]
    if isinstance(harness, StrandsBedrock):
        (request,) = harness.fake.requests
        assert request.messages == [{"role": "user", "content": [{"text": "my [masked] plan"}]}]
        assert request.system == [{"text": "Short."}]
    else:
        received = spy.responses[0]["response"]["meta"]["received"]
        assert received == {"system": "Short.", "messages": [{"role": "user", "text": "my [masked] plan"}]}


async def test_with_buffering_a_directive_replaces_the_answer(harness, run_agent, intercept):
    def replace(event):
        return {"response": {**event["response"], "text": "Replaced answer."}}

    intercept(Interceptor(response=replace, changes_responses=True))
    assert await run_agent(harness, [{"text": "Original answer."}]) == "Replaced answer."


async def test_a_provider_that_does_not_report_model_calls_is_refused(context_manager, write_skill, intercept):
    write_skill(
        "old-provider",
        """
        frontmatter = {"params": {"type": "object"}, "metadata": {"tags": ["provider"], "visibility": "hidden"}}
        async def main(ctx, args):
            return "never"
        """,
    )
    intercept(Interceptor())
    with pytest.raises(AgentAppsError, match="does not report its model calls"):
        await context_manager.invoke("agent", {"prompt": "p", "config": {"agent": "old-provider"}})


async def test_a_malformed_model_response_is_a_clear_error(context_manager, write_skill, intercept):
    write_skill(
        "sloppy-provider",
        """
        frontmatter = {"params": {"type": "object"},
                       "metadata": {"tags": ["provider"], "visibility": "hidden", "provider": {"model_calls": True}}}
        async def main(ctx, args):
            await ctx.manager.invoke(args["hook_ref"], {"type": "model-call", "turn": 1, "attempt": 1})
            await ctx.manager.invoke(args["hook_ref"], {"type": "model-response", "turn": 1, "attempt": 1,
                                                       "response": {"text": 42}})
            return "unreachable"
        """,
    )
    intercept(Interceptor())
    with pytest.raises(AgentAppsError, match=r"malformed model response \(value.text: 42 is not of type 'string'\)"):
        await context_manager.invoke("agent", {"prompt": "p", "config": {"agent": "sloppy-provider"}})
