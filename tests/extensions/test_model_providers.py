"""agent-strands on the HTTP model APIs, end to end and offline: the real Strands model
classes and the APIs' own client libraries, over HTTP, to the local fakes of
:mod:`agent_apps.testing.llm` (streaming included).

Each provider runs with the other providers' libraries made unimportable, so it needs
only its own extra. LiteLLM takes its simplest real path: an OpenAI-compatible server
(``model_id: openai/NAME`` with ``base_url``), its own client in between.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from dataclasses import dataclass
from typing import Any

import pytest

from agent_apps import AgentAppsError, Cancelled, Signal
from agent_apps.testing.llm import FakeAnthropic, FakeOllama, FakeOpenAI

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(importlib.util.find_spec("strands") is None, reason="needs the strands extra"),
    pytest.mark.filterwarnings("ignore:Accessing the .model_:DeprecationWarning"),  # LiteLLM on pydantic 2.11+
]

KEY = "test-key-1234"


@dataclass
class Provider:
    name: str
    fake: type
    sdk: str
    #: libraries the provider's extra installs besides its own (never blocked)
    also: tuple[str, ...] = ()

    def config(self, fake: Any) -> dict[str, Any]:
        url = fake.base_url if isinstance(fake, FakeOpenAI) else fake.url
        model = "openai/fake-model" if self.name == "litellm" else "fake-model"
        config = {"agent": "agent-strands", "provider": self.name, "model_id": model, "base_url": url}
        if self.name != "ollama":
            config["api_key"] = KEY
        return {**config, "retry_delay": 0}


PROVIDERS = {
    "anthropic": Provider("anthropic", FakeAnthropic, "anthropic"),
    "openai": Provider("openai", FakeOpenAI, "openai"),
    "ollama": Provider("ollama", FakeOllama, "ollama"),
    "litellm": Provider("litellm", FakeOpenAI, "litellm", also=("openai",)),
}


@pytest.fixture(params=sorted(PROVIDERS))
def provider(request, monkeypatch):
    """One provider, the others' libraries and Strands model modules unimportable."""
    chosen = PROVIDERS[request.param]
    if importlib.util.find_spec(chosen.sdk) is None:
        pytest.skip(f"needs the {chosen.name!r} extra")
    for other in PROVIDERS.values():
        if other.name != chosen.name and other.name not in chosen.also:
            monkeypatch.setitem(sys.modules, other.sdk, None)
            monkeypatch.setitem(sys.modules, f"strands.models.{other.name}", None)
    for variable in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OLLAMA_HOST"):
        monkeypatch.delenv(variable, raising=False)
    return chosen


@pytest.fixture
def fake(provider):
    with provider.fake(api_key=None if provider.name == "ollama" else KEY) as server:
        yield server
    assert server.server_errors == []


@pytest.fixture
def events(context_manager):
    got: list[dict[str, Any]] = []
    context_manager.events.subscribe("providers", lambda topic, event: got.append(event))
    return got


@pytest.fixture
def run(context_manager, provider, fake):
    async def run(*, config=None, signal=None, session=None, **args):
        call = {"prompt": "You are a test agent.", "user_message": "Do the test.", "events": "providers", **args}
        call["config"] = {**provider.config(fake), **(config or {})}
        return await context_manager.invoke("agent", call, signal=signal, session=session)

    return run


def invoke(code, **extra):
    return {"tool_uses": [{"name": "invoke", "input": {"code": code}}], **extra}


def of_type(events, kind):
    return [e for e in events if e["type"] == kind]


def tool_result_text(provider: Provider, request) -> str:
    """The tool result in the last request, in that API's shape."""
    last = request.messages[-1]
    if provider.name == "anthropic":
        (block,) = [b for b in last["content"] if b.get("type") == "tool_result"]
        content = block["content"]
        return content if isinstance(content, str) else "".join(part.get("text", "") for part in content)
    assert last["role"] == "tool"
    content = last["content"]
    return content if isinstance(content, str) else "".join(part.get("text", "") for part in content)


# -- two turns, streamed ---------------------------------------------------------------------------


async def test_two_turns_streamed_with_the_tool_result_fed_back(provider, fake, run, events):
    fake.add_turns(
        invoke("print(6 * 7)", text="Computing it.", usage={"input_tokens": 120, "output_tokens": 15}),
        {"text": "It is 42, as computed.", "usage": {"input_tokens": 160, "output_tokens": 6}},
    )
    assert await run(config={"temperature": 0.25, "max_tokens": 321}) == "It is 42, as computed."

    first, second = fake.requests
    assert first.streaming and second.streaming
    assert first.tool_names == ["invoke"]
    system = first.system
    system_text = system if isinstance(system, str) else "".join(part.get("text", "") for part in system or [])
    assert "You are a test agent." in system_text
    sampling = first.body["options"] if provider.name == "ollama" else first.body
    assert sampling["temperature"] == 0.25
    assert "42" in tool_result_text(provider, second)
    if provider.name == "anthropic":
        assert first.header("x-api-key") == KEY and first.body["max_tokens"] == 321
    elif provider.name in ("openai", "litellm"):
        assert first.header("authorization") == f"Bearer {KEY}" and first.body["max_tokens"] == 321
        assert first.model == "fake-model"  # LiteLLM took its provider prefix off
    else:
        assert first.body["options"]["num_predict"] == 321

    texts = [e["text"] for e in of_type(events, "agent-message")]
    assert len(texts) > 2 and all(e["delta"] for e in of_type(events, "agent-message"))
    assert "".join(texts) == "Computing it.It is 42, as computed."
    assert [e["result"] for e in of_type(events, "tool-result")] == ["42"]
    usage = [e["usage"] for e in of_type(events, "turn-end")]
    assert usage == [{"input_tokens": 120, "output_tokens": 15}, {"input_tokens": 160, "output_tokens": 6}]


async def test_streaming_false_sends_one_plain_request_a_turn(provider, fake, run, events):
    fake.add_turns(invoke("print(6 * 7)"), {"text": "It is 42.", "usage": {"input_tokens": 50, "output_tokens": 4}})
    assert await run(config={"streaming": False}) == "It is 42."
    assert [request.streaming for request in fake.requests] == [False, False]
    assert "42" in tool_result_text(provider, fake.requests[1])  # the tool call came through whole
    assert [e["delta"] for e in of_type(events, "agent-message")] == [False]
    assert of_type(events, "turn-end")[-1]["usage"] == {"input_tokens": 50, "output_tokens": 4}


#: The model each provider's thinking test runs (OpenAI's: one that takes reasoning_effort).
THINKING_MODELS = {"openai": "o4-mini"}


@pytest.mark.parametrize("streaming", [True, False], ids=["streamed", "plain"])
async def test_thinking_is_the_apis_reasoning_setting_and_its_reasoning_is_kept(
    provider, fake, run, events, streaming, context_manager
):
    if provider.name == "litellm":
        pytest.skip("LiteLLM's anthropic/ path needs the Anthropic fake: test_litellm_passes_thinking_through")
    fake.add_turns(
        {"reasoning": "Six sevens. ", **invoke("print(6 * 7)")},
        {"reasoning": "Done.", "text": "It is 42."},
    )
    config = {"thinking": {"budget_tokens": 3000}, "streaming": streaming}
    if provider.name in THINKING_MODELS:
        config["model_id"] = THINKING_MODELS[provider.name]
    assert await run(config=config, session=f"think-{streaming}") == "It is 42."
    body = fake.requests[0].body
    if provider.name == "anthropic":
        assert body["thinking"] == {"type": "enabled", "budget_tokens": 3000}
        assert body["max_tokens"] == 3000 + 4096
        # Anthropic wants the turn's thinking block back, signed, with its tool use
        assert fake.requests[1].messages[1]["content"][0] == {
            "type": "thinking",
            "thinking": "Six sevens. ",
            "signature": "sig",
        }
    elif provider.name == "openai":
        assert body["reasoning_effort"] == "medium"
    else:
        assert body["think"] is True
    thoughts = [e["text"] for e in of_type(events, "agent-message") if e.get("reasoning")]
    assert "".join(thoughts) == "Six sevens. Done."
    stored = context_manager.state.sessions.history(f"think-{streaming}").messages()
    assert [m.get("reasoning") for m in stored if m["role"] == "assistant"] == ["Six sevens. ", "Done."]


async def test_thinking_warns_once_for_a_model_without_reasoning_settings(provider, fake, run, caplog, monkeypatch):
    if provider.name != "openai":
        pytest.skip("only OpenAI-compatible models may take no reasoning setting")
    from agent_apps.agent import settings

    monkeypatch.setattr(settings, "_warned", set())  # what earlier tests of this process warned of
    fake.add_turns("One.", "Two.")
    with caplog.at_level("WARNING", logger="agent_apps.agent"):
        for _ in range(2):
            await run(config={"thinking": {"budget_tokens": 2048}, "model_id": "plain-model-for-warning"})
    assert "reasoning_effort" not in fake.requests[0].body
    warned = [r.getMessage() for r in caplog.records if "plain-model-for-warning" in r.getMessage()]
    assert warned == ["model.thinking is ignored: provider 'openai' model 'plain-model-for-warning' takes no "
                      "reasoning_effort (model.params may still set the model's own)"]  # fmt: skip


async def test_cached_input_tokens_are_counted_once(provider, fake, run, events):
    if provider.name not in ("openai", "litellm"):
        pytest.skip("this fake reports no prompt cache")
    usage = {"input_tokens": 30, "output_tokens": 5, "cache_read_tokens": 70, "cache_write_tokens": 7}
    fake.add_turns({"text": "Cached.", "usage": usage})
    assert await run() == "Cached."
    assert fake.requests  # the fake's prompt_tokens were 107: 30 + 70 read + 7 written
    (turn,) = [e["usage"] for e in of_type(events, "turn-end")]
    assert turn == usage


# -- errors: the same retries and messages as Bedrock ----------------------------------------------


async def test_rate_limit_is_retried_through_the_hook(fake, run, events):
    fake.add_turns({"error": "rate_limit"}, {"error": "rate_limit"}, "Finally.")
    assert await run() == "Finally."
    assert len(fake.requests) == 3  # the client library did not retry on its own: the policy did
    errors = [e for e in of_type(events, "agent-error") if not e.get("retrying")]
    assert [e["attempt"] for e in errors] == [1, 2]
    assert errors[0]["error"]["type"] == "ThrottlingException" and errors[0]["error"]["retryable"] is True
    assert len(of_type(events, "turn-start")) == 1


async def test_an_error_inside_the_stream_is_retried(fake, run):
    fake.add_turns({"text": "partial answ", "error": "overloaded", "mid_stream": True}, "Whole answer.")
    assert await run() == "Whole answer."
    assert fake.requests[0].stream_outcome == "error"


async def test_rate_limit_beyond_max_retries_is_one_clear_line(provider, fake, run):
    fake.add_turns(*[{"error": "rate_limit"}] * 3)
    with pytest.raises(AgentAppsError) as info:
        await run(config={"max_retries": 1})
    text = one_line(info.value)
    assert "rate-limiting" in text or "throttl" in text
    assert len(fake.requests) == 2


async def test_context_too_long_is_not_retried(fake, run):
    fake.add_turns({"error": "context_too_long"})
    with pytest.raises(AgentAppsError) as info:
        await run()
    text = one_line(info.value)
    assert "no longer fits the context window" in text and "context_edit" in text
    assert len(fake.requests) == 1


async def test_a_bad_key_is_refused_and_named(provider, fake, run):
    if provider.name == "ollama":
        fake.add_turns({"error": "bad_key"})  # Ollama has no keys; a proxy in front of it may
        config = {}
    else:
        config = {"api_key": "wrong-key"}  # the fake checks the key as the real service does
    with pytest.raises(AgentAppsError) as info:
        await run(config=config)
    text = one_line(info.value)
    assert "rejected the credentials" in text and "model.api_key" in text
    assert len(fake.requests) == 1


async def test_an_unknown_model_is_named(provider, context_manager):
    with provider.fake(model_ids=["real-model"]) as server:
        call = {"prompt": "p", "user_message": "u", "config": provider.config(server)}
        with pytest.raises(AgentAppsError) as info:
            await context_manager.invoke("agent", call)
    text = one_line(info.value)
    assert "was not found" in text and "model.model_id" in text


async def test_an_unreachable_server_is_retried_then_named(provider, fake, run):
    url = fake.url
    fake.close()
    with pytest.raises(AgentAppsError) as info:
        await run(config={"base_url": url + ("/v1" if isinstance(fake, FakeOpenAI) else ""), "max_retries": 1})
    assert "127.0.0.1" in one_line(info.value)


# -- cancellation ------------------------------------------------------------------------------------


async def test_cancellation_cuts_a_stream_in_progress(fake, run):
    fake.add_turns({"text": "I am thinking about this for a long time", "chunk_size": 4, "hang_after": 3})
    signal = Signal()
    task = asyncio.ensure_future(run(signal=signal))
    assert await asyncio.to_thread(fake.wait_hanging, 20)
    signal.cancel("user pressed stop")
    with pytest.raises(Cancelled, match="user pressed stop"):
        await asyncio.wait_for(task, 20)
    assert await asyncio.to_thread(fake.wait_streams_ended, 20)
    assert fake.requests[0].stream_outcome == "client_disconnected"


# -- configuration errors ---------------------------------------------------------------------------


def one_line(exc):
    text = str(exc)
    assert "\n" not in text and "Traceback" not in text
    assert isinstance(exc, AgentAppsError) and type(exc).__name__ == "ProviderError"
    return text


async def test_missing_extra_names_the_pip_extra(provider, fake, run, monkeypatch):
    monkeypatch.setitem(sys.modules, provider.sdk, None)
    monkeypatch.setitem(sys.modules, f"strands.models.{provider.name}", None)
    with pytest.raises(AgentAppsError) as info:
        await run()
    assert f"pip install 'agent-apps[{provider.name}]'" in one_line(info.value)


@pytest.mark.parametrize(("name", "variable"), [("anthropic", "ANTHROPIC_API_KEY"), ("openai", "OPENAI_API_KEY")])
async def test_a_public_api_without_a_key_says_which_variable(name, variable, context_manager, monkeypatch):
    if importlib.util.find_spec(name) is None:
        pytest.skip(f"needs the {name!r} extra")
    monkeypatch.delenv(variable, raising=False)
    call = {"prompt": "p", "user_message": "u", "config": {"provider": name, "model_id": "m"}}
    with pytest.raises(AgentAppsError) as info:
        await context_manager.invoke("agent", call)
    assert f"needs an API key: export {variable}" in one_line(info.value)


# -- attachments ------------------------------------------------------------------------------

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + bytes(40)
PDF = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<<>>\nendobj\n"


def _b64(data: bytes) -> str:
    import base64

    return base64.b64encode(data).decode()


def media_blocks(provider: Provider, request) -> list[tuple[str, str]]:
    """``(kind, base64 data)`` of the image and document blocks of the user's message
    in a request, in that API's own shape."""
    first = next(message for message in request.messages if message.get("role") == "user")
    if provider.name == "ollama":  # each block its own message, images in ``images``
        return [("image", data) for message in request.messages for data in message.get("images") or ()]
    out = []
    for block in first["content"] if isinstance(first["content"], list) else ():
        kind = block.get("type")
        if provider.name == "anthropic" and kind in ("image", "document"):
            out.append((kind, block["source"]["data"]))
        elif kind == "image_url":
            out.append(("image", block["image_url"]["url"].split("base64,", 1)[1]))
        elif kind == "file":
            out.append(("document", block["file"]["file_data"].split("base64,")[-1]))
    return out


async def test_attachments_reach_the_api_as_its_own_image_and_document_blocks(provider, fake, context_manager):
    fake.add_turns({"text": "A chart and a PDF."})
    attached = [PNG] if provider.name == "ollama" else [PNG, PDF]
    call = {"prompt": "P", "user_message": "What are these?", "config": provider.config(fake)}
    assert await context_manager.invoke("agent", call, attachments=attached) == "A chart and a PDF."
    expected = [("image", _b64(PNG))] + ([] if provider.name == "ollama" else [("document", _b64(PDF))])
    assert media_blocks(provider, fake.requests[0]) == expected


async def test_ollama_refuses_a_document_attachment_naming_it(provider, fake, context_manager):
    if provider.name != "ollama":
        pytest.skip("Ollama's model class writes images only")
    call = {"prompt": "P", "user_message": "Read it.", "config": provider.config(fake)}
    with pytest.raises(AgentAppsError, match=r"'ollama' takes image attachments only, not 'attachment-2.pdf'"):
        await context_manager.invoke("agent", call, attachments=[PNG, PDF])
    assert fake.requests == []


@pytest.mark.skipif(importlib.util.find_spec("litellm") is None, reason="needs the litellm extra")
async def test_litellm_passes_thinking_through(context_manager):
    """LiteLLM gets Anthropic's thinking setting as it is, and maps it for its model."""
    with FakeAnthropic(api_key=KEY) as fake:
        fake.add_turns({"reasoning": "Plainly.", "text": "Passed."})
        config = {
            "agent": "agent-strands",
            "provider": "litellm",
            "model_id": "anthropic/claude-sonnet-4-5",
            "base_url": fake.url,
            "api_key": KEY,
            "thinking": {"budget_tokens": 2048},
            "max_tokens": 4000,
        }
        call = {"prompt": "P", "user_message": "Think.", "config": config}
        assert await context_manager.invoke("agent", call, session="lite") == "Passed."
    assert fake.requests[0].body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    (answer,) = [m for m in context_manager.state.sessions.history("lite").messages() if m["role"] == "assistant"]
    assert answer["reasoning"] == "Plainly."


@pytest.mark.skipif(importlib.util.find_spec("litellm") is None, reason="needs the litellm extra")
async def test_litellm_gets_the_reasoning_parameter_its_model_takes(context_manager, caplog, monkeypatch):
    """LiteLLM refuses a parameter its model does not take: an OpenAI reasoning model
    gets reasoning_effort, a model with neither gets nothing and a warning."""
    from agent_apps.agent import settings

    monkeypatch.setattr(settings, "_warned", set())
    bodies = {}
    for model in ("openai/o4-mini", "openai/gpt-4o"):
        with FakeOpenAI(api_key=KEY) as fake:
            fake.add_turns("Done.")
            config = {"agent": "agent-strands", "provider": "litellm", "model_id": model, "base_url": fake.base_url,
                      "api_key": KEY, "thinking": {"budget_tokens": 5000}}  # fmt: skip
            with caplog.at_level("WARNING", logger="agent_apps.agent"):
                assert await context_manager.invoke("agent", {"prompt": "P", "config": config}) == "Done."
            bodies[model] = fake.requests[0].body
    assert bodies["openai/o4-mini"]["reasoning_effort"] == "high"
    assert "reasoning_effort" not in bodies["openai/gpt-4o"] and "thinking" not in bodies["openai/gpt-4o"]
    assert [r.getMessage() for r in caplog.records if "model.thinking" in r.getMessage()] == [
        "model.thinking is ignored: provider 'litellm' model 'openai/gpt-4o' takes neither thinking nor "
        "reasoning_effort (model.params may still set the model's own)"
    ]
