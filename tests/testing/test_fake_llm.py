"""The fake model APIs, driven by the APIs' own client libraries over HTTP."""

from __future__ import annotations

import importlib.util
import threading

import pytest

from agent_apps.testing.llm import FakeAnthropic, FakeOllama, FakeOpenAI

USER = [{"role": "user", "content": "What is 1+1?"}]
TURN = {
    "reasoning": "Simple sums.",
    "text": "Let me compute that.",
    "tool_uses": [{"name": "invoke", "input": {"code": "print(1 + 1)"}, "id": "call_1"}],
    "usage": {"input_tokens": 11, "output_tokens": 7},
}


def needs(module):
    return pytest.mark.skipif(importlib.util.find_spec(module) is None, reason=f"needs {module}")


@pytest.fixture
def no_leaks():
    before = set(threading.enumerate())
    yield
    leftover = [t for t in set(threading.enumerate()) - before if t.is_alive() and t.name.startswith("Fake")]
    assert leftover == []


# -- Anthropic ------------------------------------------------------------------------------------


@needs("anthropic")
def test_anthropic_streams_thinking_text_and_tool_use(no_leaks):
    import anthropic

    with FakeAnthropic([TURN], api_key="k") as fake:
        client = anthropic.Anthropic(base_url=fake.url, api_key="k", max_retries=0)
        with client.messages.stream(model="m", max_tokens=10, messages=USER, system="Be brief.") as stream:
            text = "".join(stream.text_stream)
            message = stream.get_final_message()
        client.close()
    assert text == "Let me compute that."
    thinking, said, tool = message.content
    assert thinking.thinking == "Simple sums." and said.text == text
    assert (tool.id, tool.name, tool.input) == ("call_1", "invoke", {"code": "print(1 + 1)"})
    assert message.stop_reason == "tool_use"
    assert (message.usage.input_tokens, message.usage.output_tokens) == (11, 7)
    (request,) = fake.requests
    assert request.streaming and request.system == "Be brief." and request.header("x-api-key") == "k"
    assert request.stream_outcome == "complete"


@needs("anthropic")
def test_anthropic_errors_are_the_sdks_own():
    import anthropic

    turns = [
        {"error": "rate_limit"},
        {"error": "context_too_long"},
        {"text": "par", "error": "overloaded", "mid_stream": True},
    ]
    with FakeAnthropic(turns, api_key="k") as fake:
        client = anthropic.Anthropic(base_url=fake.url, api_key="k", max_retries=0)
        with pytest.raises(anthropic.RateLimitError):
            client.messages.create(model="m", max_tokens=10, messages=USER)
        with pytest.raises(anthropic.BadRequestError, match="prompt is too long"):
            client.messages.create(model="m", max_tokens=10, messages=USER)
        with pytest.raises(anthropic.APIStatusError, match="overloaded_error"):
            with client.messages.stream(model="m", max_tokens=10, messages=USER) as stream:
                list(stream)
        with pytest.raises(anthropic.AuthenticationError):
            anthropic.Anthropic(base_url=fake.url, api_key="wrong", max_retries=0).messages.create(
                model="m", max_tokens=10, messages=USER
            )
        client.close()
    assert fake.requests[2].stream_outcome == "error"


# -- OpenAI ---------------------------------------------------------------------------------------


@needs("openai")
def test_openai_streams_text_tool_calls_and_usage(no_leaks):
    import openai

    with FakeOpenAI([TURN, "Plain answer."], chunk_size=3) as fake:
        client = openai.OpenAI(base_url=fake.base_url, api_key="k", max_retries=0)
        chunks = list(
            client.chat.completions.create(
                model="m", messages=USER, stream=True, stream_options={"include_usage": True}
            )
        )
        plain = client.chat.completions.create(model="m", messages=USER)
        client.close()
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Let me compute that."
    arguments = "".join(
        call.function.arguments or "" for c in chunks if c.choices for call in c.choices[0].delta.tool_calls or []
    )
    assert arguments == '{"code": "print(1 + 1)"}'
    finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finish == ["tool_calls"]
    assert chunks[-1].usage.prompt_tokens == 11 and chunks[-1].usage.completion_tokens == 7
    assert plain.choices[0].message.content == "Plain answer." and plain.choices[0].finish_reason == "stop"
    assert fake.requests[0].header("authorization") == "Bearer k"


@needs("openai")
def test_openai_errors_are_the_sdks_own():
    import openai

    turns = [
        {"error": "rate_limit"},
        {"error": "context_too_long"},
        {"text": "par", "error": "server_error", "mid_stream": True},
    ]
    with FakeOpenAI(turns, model_ids=["m"]) as fake:
        client = openai.OpenAI(base_url=fake.base_url, api_key="k", max_retries=0)
        with pytest.raises(openai.RateLimitError):
            client.chat.completions.create(model="m", messages=USER)
        with pytest.raises(openai.BadRequestError) as info:
            client.chat.completions.create(model="m", messages=USER)
        assert info.value.code == "context_length_exceeded"
        with pytest.raises(openai.APIError, match="server had an error"):
            list(client.chat.completions.create(model="m", messages=USER, stream=True))
        with pytest.raises(openai.NotFoundError, match="`other` does not exist"):
            client.chat.completions.create(model="other", messages=USER)
        client.close()


# -- Ollama ---------------------------------------------------------------------------------------


@needs("ollama")
def test_ollama_streams_ndjson_with_tool_calls_and_counts(no_leaks):
    import ollama

    with FakeOllama([TURN, {"text": "Done."}]) as fake:
        client = ollama.Client(fake.url)
        parts = list(client.chat(model="m", messages=USER, stream=True))
        whole = client.chat(model="m", messages=USER, stream=False)
    assert "".join(p.message.content for p in parts) == "Let me compute that."
    assert "".join(p.message.thinking or "" for p in parts) == "Simple sums."
    (call,) = [c for p in parts for c in p.message.tool_calls or []]
    assert call.function.name == "invoke" and call.function.arguments == {"code": "print(1 + 1)"}
    last = parts[-1]
    assert last.done and (last.prompt_eval_count, last.eval_count) == (11, 7)
    assert whole.message.content == "Done." and whole.done
    assert fake.requests[0].streaming is True and fake.requests[1].body["stream"] is False


@needs("ollama")
def test_ollama_errors_and_a_stalled_stream():
    import ollama

    turns = [{"error": "not_found"}, {"text": "slow answer", "chunk_size": 2, "hang_after": 2}]
    with FakeOllama(turns) as fake:
        client = ollama.Client(fake.url)
        with pytest.raises(ollama.ResponseError, match='model "m" not found') as info:
            client.chat(model="m", messages=USER)
        assert info.value.status_code == 404
        fake.release()  # the stalled stream goes on
        parts = list(client.chat(model="m", messages=USER, stream=True))
        assert "".join(p.message.content for p in parts) == "slow answer"
        with pytest.raises(ollama.ResponseError, match="no scripted turn left"):
            client.chat(model="m", messages=USER)
    assert fake.requests[1].stream_outcome == "complete"


def test_an_unknown_error_kind_is_a_server_error_not_a_hang():
    import urllib.error
    import urllib.request

    with FakeOpenAI([{"error": "nope"}]) as fake:
        request = urllib.request.Request(fake.base_url + "/chat/completions", data=b'{"model": "m"}', method="POST")
        with pytest.raises((urllib.error.URLError, ConnectionError)):
            urllib.request.urlopen(request, timeout=10)
    assert "unknown error kind 'nope'" in str(fake.server_errors[0])
