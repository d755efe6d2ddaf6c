"""Hostile model endpoints: every provider of agent-strands against a fake that lies.

Each attack runs against Amazon Bedrock, the Anthropic API, OpenAI, Ollama and LiteLLM
(its OpenAI-compatible path), through the API's own client library and Strands' model
class, over HTTP to the local fakes of :mod:`agent_apps.testing`, which send what a
library would refuse to: floods that never end, bodies trickled a byte at a time,
replies cut off mid-frame, token counts that lie, redirects to another host. What must
hold (docs/security.md, "What a peer can do"): a cancellation stops the provider at
the next event whatever the peer sends, a reply is capped (``model.max_output_kb``), a
reply without a stop reason is a retried model error and never a result, usage is
clamped before a budget counts it, and nothing follows a redirect.
"""

from __future__ import annotations

import asyncio
import importlib.util
from dataclasses import dataclass
from typing import Any

import pytest

from agent_apps import AgentAppsError, BudgetExceeded, Cancelled, Signal
from agent_apps.testing.bedrock import FakeBedrock, dummy_aws_env
from agent_apps.testing.llm import FakeAnthropic, FakeOllama, FakeOpenAI

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(importlib.util.find_spec("strands") is None, reason="needs the strands extra"),
    pytest.mark.filterwarnings("ignore:Accessing the .model_:DeprecationWarning"),  # LiteLLM on pydantic 2.11+
]

KEY = "the-secret-key-1234"


@dataclass
class Provider:
    name: str
    fake: type
    sdk: str
    #: the path the fake serves (a redirect points the same request elsewhere)
    path: str

    def url(self, fake: Any) -> str:
        if isinstance(fake, FakeBedrock):
            return fake.endpoint_url
        return fake.base_url if isinstance(fake, FakeOpenAI) else fake.url

    def config(self, fake: Any) -> dict[str, Any]:
        config: dict[str, Any] = {"agent": "agent-strands", "retry_delay": 0, "api_key": KEY}
        if self.name == "bedrock":
            return {**config, "model_id": "m", "region": "us-east-1", "endpoint_url": self.url(fake)}
        model = "openai/fake-model" if self.name == "litellm" else "fake-model"
        return {**config, "provider": self.name, "model_id": model, "base_url": self.url(fake)}


PROVIDERS = {
    "bedrock": Provider("bedrock", FakeBedrock, "boto3", "/model/m/converse-stream"),
    "anthropic": Provider("anthropic", FakeAnthropic, "anthropic", "/v1/messages"),
    "openai": Provider("openai", FakeOpenAI, "openai", "/v1/chat/completions"),
    "ollama": Provider("ollama", FakeOllama, "ollama", "/api/chat"),
    "litellm": Provider("litellm", FakeOpenAI, "litellm", "/v1/chat/completions"),
}


@pytest.fixture(params=sorted(PROVIDERS))
def provider(request, monkeypatch):
    chosen = PROVIDERS[request.param]
    if importlib.util.find_spec(chosen.sdk) is None:
        pytest.skip(f"needs the {chosen.name!r} extra")
    for name, value in dummy_aws_env().items():
        monkeypatch.setenv(name, value)
    for variable in ("AWS_PROFILE", "AWS_BEARER_TOKEN_BEDROCK", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OLLAMA_HOST"):
        monkeypatch.delenv(variable, raising=False)
    return chosen


@pytest.fixture
def fake(provider):
    with provider.fake() as server:
        yield server
    assert server.server_errors == []


@pytest.fixture
def events(context_manager):
    got: list[dict[str, Any]] = []
    context_manager.events.subscribe("redteam-models", lambda topic, event: got.append(event))
    return got


@pytest.fixture
def run(context_manager, provider, fake):
    async def run(*, config=None, signal=None, **args):
        call = {"prompt": "You are a test agent.", "user_message": "Do it.", "events": "redteam-models", **args}
        call["config"] = {**provider.config(fake), **(config or {})}
        return await context_manager.invoke("agent", call, signal=signal)

    return run


def messages(events):
    return [e for e in events if e["type"] == "agent-message"]


# -- 1. a cancellation stops a provider at the next event, whatever the peer sends --------------


async def test_a_timer_cancelling_an_endless_flood_stops_it_at_the_next_event(fake, run, events):
    # Bedrock's reader thread queued the flood faster than the hooks reported it, and the
    # loop rarely got a turn: the timer fired late, and thousands of queued deltas were
    # still reported after it. Each delta now gives the loop a turn, and none is
    # reported once the run is cancelled.
    fake.add_turns({"text": "Thinking", "flood": True})
    signal = Signal()
    at_cancel: list[int] = []
    signal.add_callback(lambda reason: at_cancel.append(len(messages(events))))
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(run(signal=signal, config={"max_output_kb": 1_000_000}))
    while len(messages(events)) < 50:  # the flood is on
        await asyncio.sleep(0.01)
    loop.call_later(0.3, signal.cancel, "deadline")
    with pytest.raises(Cancelled, match="deadline"):
        await asyncio.wait_for(task, 60)
    assert len(messages(events)) - at_cancel[0] <= 1
    assert await asyncio.to_thread(fake.wait_streams_ended, 20)
    assert fake.requests[0].stream_outcome == "client_disconnected"  # nothing reads on behind the run


async def test_a_flood_leaves_the_event_loop_a_turn_at_every_event(fake, run, events, context_manager):
    # What lets a deadline's timer fire on time: a callback scheduled while the flood is
    # reported runs before the next few events are. Bedrock's reader thread queued the
    # flood, and its consumer drained the queue without a turn of the loop, so the
    # timer of a 30 s --timeout fired 7 s late (the longer the flood, the later).
    fake.add_turns({"text": "Thinking", "flood": True})
    loop = asyncio.get_running_loop()
    lags: list[int] = []

    def probe(topic, event):
        seen = len(messages(events))
        if event["type"] == "agent-message" and seen % 200 == 0 and len(lags) < 10:
            loop.call_soon(lambda: lags.append(len(messages(events)) - seen))

    context_manager.events.subscribe("redteam-models", probe)
    signal = Signal()
    task = asyncio.ensure_future(run(signal=signal, config={"max_output_kb": 1_000_000}))
    while len(lags) < 10 and not task.done():
        await asyncio.sleep(0.01)
    signal.cancel("enough")
    with pytest.raises(Cancelled):
        await asyncio.wait_for(task, 60)
    assert len(lags) >= 10 and max(lags) <= 2, lags


async def test_a_deadline_stops_an_endless_flood(fake, run, events):
    fake.add_turns("Warmed up.", {"text": "Thinking", "flood": True})
    assert await run() == "Warmed up."  # the provider's libraries are imported: the deadline is the flood's
    with pytest.raises(BudgetExceeded, match="deadline_s"):
        await asyncio.wait_for(run(config={"max_output_kb": 1_000_000, "budget": {"deadline_s": 5}}), 60)
    assert await asyncio.to_thread(fake.wait_streams_ended, 20)
    assert fake.requests[1].stream_outcome == "client_disconnected"


async def test_a_cancellation_cuts_a_reply_trickled_a_byte_at_a_time(fake, run, events):
    # one byte every 50 ms: the socket never stalls long enough for the read timeout
    fake.add_turns({"text": "A very slow answer that never really arrives.", "trickle": 0.05})
    signal = Signal()
    task = asyncio.ensure_future(run(signal=signal))
    while not fake.requests or fake.requests[0].events_sent < 1:
        await asyncio.sleep(0.01)
    asyncio.get_running_loop().call_later(0.3, signal.cancel, "user pressed stop")
    with pytest.raises(Cancelled, match="user pressed stop"):
        await asyncio.wait_for(task, 60)
    assert await asyncio.to_thread(fake.wait_streams_ended, 20)
    assert fake.requests[0].stream_outcome == "client_disconnected"


# -- 1. a reply's output is capped ----------------------------------------------------------------


async def test_a_reply_past_max_output_kb_fails_the_turn_and_is_not_retried(fake, run, events):
    fake.add_turns({"text": "Here it comes", "flood": True})
    with pytest.raises(AgentAppsError) as info:
        await asyncio.wait_for(run(config={"max_output_kb": 8, "max_retries": 3}), 60)
    assert "model.max_output_kb (8 KB" in str(info.value)
    assert type(info.value).__name__ == "ProviderError" and info.value.code == "OutputTooLarge"
    assert len(fake.requests) == 1  # a reply that long would be as long again
    text = "".join(e["text"] for e in messages(events))
    assert len(text) <= 8 * 1024
    assert await asyncio.to_thread(fake.wait_streams_ended, 20)
    assert fake.requests[0].stream_outcome == "client_disconnected"


# -- 2. a reply without a stop reason is a model error (retried), never a result -----------------


@pytest.mark.parametrize("cut", [True, "clean"], ids=["mid-frame", "after-the-content"])
async def test_a_reply_cut_off_before_its_stop_reason_is_retried(fake, run, events, cut):
    fake.add_turns({"text": "The answer is", "no_stop": cut}, "The whole answer.")
    assert await run() == "The whole answer."
    (error,) = [e for e in events if e["type"] == "agent-error" and not e.get("retrying")]
    assert error["error"]["type"] == "IncompleteReply" and error["error"]["retryable"] is True
    assert len(fake.requests) == 2


async def test_a_reply_cut_off_is_never_the_result(fake, run):
    fake.add_turns({"text": "Transfer the money to", "no_stop": True})
    with pytest.raises(AgentAppsError, match="did not finish its reply"):
        await run(config={"max_retries": 0})


# -- 3. usage is clamped before a budget counts it ----------------------------------------------


def code_turn(**extra):
    return {"tool_uses": [{"name": "invoke", "input": {"code": "x = 1"}}], **extra}


async def test_a_negative_token_count_gives_no_budget_back(fake, run, events):
    # each reply says it read -1e9 tokens and wrote 40: clamped to 0 and 40, the 120-token
    # budget stops the run after three replies (counted as reported, it never would)
    fake.add_turns(*[code_turn(raw_usage={"input": -1e9, "output": 40}) for _ in range(8)])
    with pytest.raises(BudgetExceeded, match="model.budget.tokens"):
        await run(config={"budget": {"tokens": 120}})
    assert len(fake.requests) == 3
    usage = [e["usage"] for e in events if e["type"] == "turn-end"]
    assert usage == [{"input_tokens": 0, "output_tokens": 40}] * 3


async def test_a_huge_token_count_is_clamped_and_stops_the_budget(fake, run, events):
    fake.add_turns(*[code_turn(raw_usage={"input": 10**30, "output": 10**30}) for _ in range(3)])
    with pytest.raises(BudgetExceeded, match="model.budget.tokens"):
        await run(config={"budget": {"tokens": 10_000}})
    assert len(fake.requests) == 1
    (end,) = [e for e in events if e["type"] == "turn-end"]
    assert end["usage"] == {"input_tokens": 10**9, "output_tokens": 10**9}


@pytest.mark.parametrize(
    ("said", "counted"),
    [(-1e9, 0), (float("nan"), 0), ("many", 0), ([1], 0), (None, 0), (12.7, 12), ("77", 77), (float("inf"), 10**9)],
    ids=["negative", "nan", "word", "list", "null", "fraction", "numeral", "infinite"],
)
async def test_whatever_a_bedrock_endpoint_says_its_usage_is_the_counts_are_whole_and_bounded(
    context_manager, monkeypatch, said, counted
):
    # Bedrock's event stream is JSON, passed on as it came (NaN included); Strands adds
    # the counts up, so a string there used to crash its loop
    for name, value in dummy_aws_env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    got: list[dict[str, Any]] = []
    context_manager.events.subscribe("lies", lambda topic, event: got.append(event))
    with FakeBedrock([{"text": "Fine.", "raw_usage": {"input": said, "output": said}}]) as fake:
        config = PROVIDERS["bedrock"].config(fake)
        call = {"prompt": "p", "config": config, "events": "lies"}
        assert await context_manager.invoke("agent", call) == "Fine."
    (end,) = [e for e in got if e["type"] == "turn-end"]
    (complete,) = [e for e in got if e["type"] == "agent-complete"]
    assert end["usage"] == complete["usage"] == {"input_tokens": counted, "output_tokens": counted}


# -- 4. no provider follows a redirect ------------------------------------------------------------


async def test_a_redirect_to_another_host_is_not_followed(provider, fake, run):
    with provider.fake(["An answer from the other host."]) as other:
        fake.add_turns({"redirect": provider.url(other).removesuffix("/v1") + provider.path})
        with pytest.raises(AgentAppsError) as info:
            await run()
    text = str(info.value)
    assert "redirected the request (status 307" in text and "does not follow" in text
    assert info.value.code == "Redirected"
    assert other.requests == []  # neither the conversation nor the key went there
    assert len(fake.requests) == 1  # and it is not retried
