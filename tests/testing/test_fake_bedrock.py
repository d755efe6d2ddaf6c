"""FakeBedrock, driven by real boto3 and real Strands over HTTP (offline, dummy credentials)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from agent_apps.testing.bedrock import (
    ERRORS,
    FakeBedrock,
    decode_event_stream,
    dummy_aws_env,
    encode_event,
)

MODEL = "anthropic.claude-fake-v1:0"
USER = [{"role": "user", "content": [{"text": "What is 1+1?"}]}]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def offline_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in dummy_aws_env().items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_BEARER_TOKEN_BEDROCK", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def fake():
    threads_before = set(threading.enumerate())
    with FakeBedrock() as server:
        yield server
    assert server.server_errors == []
    leftover = [t for t in set(threading.enumerate()) - threads_before if t.is_alive()]
    # boto3/strands may keep their own pools; the server's threads must be gone.
    assert not [t for t in leftover if "FakeBedrock" in t.name or "process_request" in t.name]


# ---------------------------------------------------------------------------------------------
# Framing and packaging
# ---------------------------------------------------------------------------------------------


def test_event_encoding_is_parsed_by_botocore() -> None:
    from botocore.eventstream import EventStreamBuffer

    data = encode_event(
        {":event-type": "contentBlockDelta", ":content-type": "application/json", ":message-type": "event"},
        b'{"contentBlockIndex":0,"delta":{"text":"h\xc3\xa9"}}',
    )
    buffer = EventStreamBuffer()
    # Fed in two pieces, like a network read.
    buffer.add_data(data[:7])
    assert list(buffer) == []
    buffer.add_data(data[7:])
    (message,) = list(buffer)
    assert message.headers[":event-type"] == "contentBlockDelta"
    assert json.loads(message.payload)["delta"]["text"] == "hé"
    assert decode_event_stream(data) == [(message.headers, message.payload)]
    with pytest.raises(ValueError, match="CRC"):
        decode_event_stream(data[:-1] + bytes([data[-1] ^ 1]))


def test_import_is_lazy() -> None:
    code = (
        "import sys, agent_apps.testing as t; t.FakeBedrock; t.provider_suite; import agent_apps.testing.bedrock;"
        "print(sorted(m for m in ('boto3','botocore','strands','wasmtime') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# ---------------------------------------------------------------------------------------------
# boto3
# ---------------------------------------------------------------------------------------------


def test_converse_text_and_request_recording(fake: FakeBedrock) -> None:
    fake.add_turns({"text": "Two.", "usage": {"inputTokens": 11, "outputTokens": 2}, "latency_ms": 7})
    client = fake.client()
    response = client.converse(
        modelId=MODEL,
        messages=USER,
        system=[{"text": "Be brief."}],
        inferenceConfig={"maxTokens": 100, "temperature": 0.2},
    )
    assert response["output"]["message"] == {"role": "assistant", "content": [{"text": "Two."}]}
    assert response["stopReason"] == "end_turn"
    assert response["usage"] == {"inputTokens": 11, "outputTokens": 2, "totalTokens": 13}
    assert response["metrics"] == {"latencyMs": 7}
    assert response["ResponseMetadata"]["RequestId"] == fake.requests[0].request_id

    (request,) = fake.requests
    assert request.operation == "Converse"
    assert request.model_id == MODEL  # percent-decoded from the path
    assert request.path == "/model/anthropic.claude-fake-v1%3A0/converse"
    assert request.system == [{"text": "Be brief."}]
    assert request.messages == USER
    assert request.inference_config == {"maxTokens": 100, "temperature": 0.2}
    assert request.has_authorization and request.auth_scheme == "AWS4-HMAC-SHA256"
    assert fake.remaining_turns == 0


def test_converse_tool_use_and_reasoning(fake: FakeBedrock) -> None:
    fake.add_turns(
        {
            "reasoning": "Use the tool.",
            "reasoning_signature": "sig-1",
            "text": "Let me compute.",
            "tool_uses": [{"name": "invoke", "input": {"code": "1+1"}, "id": "tu-1"}, {"name": "invoke", "input": {}}],
        }
    )
    tool_config = {
        "tools": [
            {"toolSpec": {"name": "invoke", "inputSchema": {"json": {"type": "object", "properties": {}}}}}
        ]
    }
    response = fake.client().converse(modelId=MODEL, messages=USER, toolConfig=tool_config)
    assert response["stopReason"] == "tool_use"
    assert response["output"]["message"]["content"] == [
        {"reasoningContent": {"reasoningText": {"text": "Use the tool.", "signature": "sig-1"}}},
        {"text": "Let me compute."},
        {"toolUse": {"toolUseId": "tu-1", "name": "invoke", "input": {"code": "1+1"}}},
        {"toolUse": {"toolUseId": "tooluse_1_1", "name": "invoke", "input": {}}},
    ]
    assert fake.requests[0].tool_names == ["invoke"]
    assert fake.requests[0].tool_config == tool_config


def test_converse_stream_deltas_tool_chunks_and_metadata(fake: FakeBedrock) -> None:
    fake.add_turns(
        {
            "reasoning": "Think about it first.",
            "text": "Running the code now, then answering.",
            "tool_uses": [{"name": "invoke", "input": {"code": "print(1 + 1)", "language": "python"}, "id": "t1"}],
            "usage": {"inputTokens": 30, "outputTokens": 12},
            "chunk_size": 5,
        }
    )
    response = fake.client().converse_stream(modelId=MODEL, messages=USER)
    events = list(response["stream"])
    kinds = [next(iter(e)) for e in events]
    assert kinds[0] == "messageStart" and kinds[-2:] == ["messageStop", "metadata"]

    deltas = [e["contentBlockDelta"] for e in events if "contentBlockDelta" in e]
    reasoning = [d["delta"]["reasoningContent"]["text"] for d in deltas if "reasoningContent" in d["delta"]]
    text = [d["delta"]["text"] for d in deltas if "text" in d["delta"]]
    tool_input = [d["delta"]["toolUse"]["input"] for d in deltas if "toolUse" in d["delta"]]
    assert len(text) > 1 and "".join(text) == "Running the code now, then answering."
    assert len(reasoning) > 1 and "".join(reasoning) == "Think about it first."
    assert len(tool_input) > 1 and json.loads("".join(tool_input)) == {"code": "print(1 + 1)", "language": "python"}

    (start,) = [e["contentBlockStart"] for e in events if "contentBlockStart" in e]
    assert start == {"contentBlockIndex": 2, "start": {"toolUse": {"toolUseId": "t1", "name": "invoke"}}}
    assert [e["contentBlockStop"]["contentBlockIndex"] for e in events if "contentBlockStop" in e] == [0, 1, 2]
    assert events[-2] == {"messageStop": {"stopReason": "tool_use"}}
    assert events[-1]["metadata"]["usage"] == {"inputTokens": 30, "outputTokens": 12, "totalTokens": 42}
    assert fake.requests[0].operation == "ConverseStream"
    assert fake.requests[0].stream_outcome == "complete"


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("ThrottlingException", 429),
        ("AccessDeniedException", 403),
        ("ResourceNotFoundException", 404),
        ("ServiceUnavailableException", 503),
    ],
)
@pytest.mark.parametrize("streaming", [False, True])
def test_error_turns_become_client_errors(fake: FakeBedrock, code: str, status: int, streaming: bool) -> None:
    from botocore.exceptions import ClientError

    fake.add_turns({"error": code})
    client = fake.client()
    call = client.converse_stream if streaming else client.converse
    with pytest.raises(ClientError) as caught:
        call(modelId=MODEL, messages=USER)
    error = caught.value.response
    assert error["Error"]["Code"] == code
    assert error["Error"]["Message"] == ERRORS[code][1]
    assert error["ResponseMetadata"]["HTTPStatusCode"] == status
    # botocore maps the code onto the modeled exception class
    assert type(caught.value).__name__ == code


def test_custom_error_message_and_status(fake: FakeBedrock) -> None:
    from botocore.exceptions import ClientError

    fake.add_turns({"error": "ThrottlingException", "message": "Slow down.", "status": 400})
    with pytest.raises(ClientError) as caught:
        fake.client().converse(modelId=MODEL, messages=USER)
    assert caught.value.response["Error"] == {"Code": "ThrottlingException", "Message": "Slow down."}
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400


def test_unknown_model_is_a_validation_error_and_uses_no_turn() -> None:
    from botocore.exceptions import ClientError

    with FakeBedrock(["ok"], model_ids=[MODEL]) as fake:
        with pytest.raises(ClientError) as caught:
            fake.client().converse(modelId="no.such-model", messages=USER)
        assert caught.value.response["Error"] == {
            "Code": "ValidationException",
            "Message": "The provided model identifier is invalid.",
        }
        assert fake.remaining_turns == 1
        assert fake.client().converse(modelId=MODEL, messages=USER)["output"]["message"]["content"] == [
            {"text": "ok"}
        ]


def test_exhausted_script_is_a_clear_error(fake: FakeBedrock) -> None:
    from botocore.exceptions import ClientError

    with pytest.raises(ClientError, match="no scripted turn left for request #1"):
        fake.client().converse(modelId=MODEL, messages=USER)


def test_botocore_retries_consume_turns(fake: FakeBedrock) -> None:
    """With botocore's own retries on, a throttle is retried before the caller sees it."""
    fake.add_turns({"error": "ThrottlingException"}, "after retry")
    response = fake.client(retries=2).converse(modelId=MODEL, messages=USER)
    assert response["output"]["message"]["content"] == [{"text": "after retry"}]
    assert len(fake.requests) == 2


def test_mid_stream_exception(fake: FakeBedrock) -> None:
    from botocore.exceptions import EventStreamError

    fake.add_turns({"text": "partial answer", "error": "ModelStreamErrorException", "message": "model broke"})
    stream = fake.client().converse_stream(modelId=MODEL, messages=USER)["stream"]
    received = []
    with pytest.raises(EventStreamError) as caught:
        for event in stream:
            received.append(event)
    assert caught.value.response["Error"] == {"Code": "modelStreamErrorException", "Message": "model broke"}
    assert "".join(e["contentBlockDelta"]["delta"]["text"] for e in received if "contentBlockDelta" in e) == (
        "partial answer"
    )
    assert not any("messageStop" in e for e in received)
    assert fake.requests[0].stream_outcome == "error"


def test_mid_stream_throttling_for_any_error_code(fake: FakeBedrock) -> None:
    from botocore.exceptions import EventStreamError

    fake.add_turns({"text": "x", "error": "ThrottlingException", "mid_stream": True})
    with pytest.raises(EventStreamError) as caught:
        list(fake.client().converse_stream(modelId=MODEL, messages=USER)["stream"])
    assert caught.value.response["Error"]["Code"] == "throttlingException"


def test_callable_turns_see_the_request(fake: FakeBedrock) -> None:
    def echo(body: dict[str, Any]) -> str:
        return "you said: " + body["messages"][-1]["content"][0]["text"]

    fake.add_turns(echo, lambda body: {"text": str(len(body["messages"]))})
    client = fake.client()
    first = client.converse(modelId=MODEL, messages=USER)
    assert first["output"]["message"]["content"] == [{"text": "you said: What is 1+1?"}]
    second = client.converse(modelId=MODEL, messages=USER * 3)
    assert second["output"]["message"]["content"] == [{"text": "3"}]


def test_whole_script_as_one_callable() -> None:
    with FakeBedrock(lambda body: {"text": f"turn for {len(body['messages'])}"}) as fake:
        client = fake.client()
        for _ in range(3):
            assert client.converse(modelId=MODEL, messages=USER)["stopReason"] == "end_turn"
        assert len(fake.requests) == 3


def test_bearer_api_key_is_recorded(fake: FakeBedrock) -> None:
    from botocore import UNSIGNED
    from botocore.config import Config

    fake.add_turns("ok")
    client = fake.client(config=Config(signature_version=UNSIGNED, retries={"total_max_attempts": 1}))
    client.converse(modelId=MODEL, messages=USER)
    assert not fake.requests[0].has_authorization

    fake.add_turns("ok")
    client = fake.client()
    client.meta.events.register(
        "before-send.bedrock-runtime.*", lambda request, **_: request.headers.__setitem__("Authorization", "Bearer k")
    )
    client.converse(modelId=MODEL, messages=USER)
    assert fake.requests[1].auth_scheme == "Bearer"


def test_unknown_operation_is_404(fake: FakeBedrock) -> None:
    import urllib.error
    import urllib.request

    for method, data in (("POST", b'{"x": 1}'), ("GET", None)):
        request = urllib.request.Request(fake.endpoint_url + "/model/m/invoke", data=data, method=method)
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(request, timeout=10)
        assert caught.value.code == 404
        assert caught.value.headers["x-amzn-ErrorType"].startswith("UnknownOperationException")
        caught.value.close()
    assert fake.requests == []


# ---------------------------------------------------------------------------------------------
# Pacing, hanging, disconnects
# ---------------------------------------------------------------------------------------------


def test_paced_stream_completes(fake: FakeBedrock) -> None:
    fake.add_turns({"text": "slow but steady", "chunk_size": 3, "delay": 0.001})
    events = list(fake.client().converse_stream(modelId=MODEL, messages=USER)["stream"])
    assert "".join(e["contentBlockDelta"]["delta"]["text"] for e in events if "contentBlockDelta" in e) == (
        "slow but steady"
    )


def test_hang_then_client_disconnects(fake: FakeBedrock) -> None:
    fake.add_turns({"text": "a fairly long answer", "chunk_size": 4, "hang_after": 3})
    stream = fake.client().converse_stream(modelId=MODEL, messages=USER)["stream"]
    iterator = iter(stream)
    received = [next(iterator) for _ in range(3)]
    assert "messageStart" in received[0]
    assert fake.wait_hanging()
    assert fake.hanging == 1
    stream.close()  # what Strands does on cancellation
    assert fake.wait_streams_ended()
    assert fake.requests[0].stream_outcome == "client_disconnected"
    assert fake.requests[0].events_sent == 3
    assert fake.hanging == 0


def test_hang_then_release_completes_the_stream(fake: FakeBedrock) -> None:
    fake.add_turns({"text": "released", "hang_after": 2})
    releaser = threading.Thread(target=lambda: fake.wait_hanging() and fake.release())
    releaser.start()
    events = list(fake.client().converse_stream(modelId=MODEL, messages=USER)["stream"])
    releaser.join()
    assert events[-1]["metadata"]["usage"]["totalTokens"] > 0
    assert fake.wait_streams_ended()
    assert fake.requests[0].stream_outcome == "complete"


def test_close_ends_a_hung_stream_and_leaves_no_thread() -> None:
    threads_before = set(threading.enumerate())
    fake = FakeBedrock([{"text": "never finished", "hang_after": 2}])
    outcome: dict[str, Any] = {}

    def read() -> None:
        try:
            outcome["events"] = list(fake.client().converse_stream(modelId=MODEL, messages=USER)["stream"])
        except Exception as error:  # the connection is cut mid-body
            outcome["error"] = error

    reader = threading.Thread(target=read)
    reader.start()
    assert fake.wait_hanging()
    fake.close()
    reader.join()
    assert "error" in outcome
    assert fake.requests[0].stream_outcome == "server_closed"
    fake.close()  # idempotent
    assert [t for t in set(threading.enumerate()) - threads_before if t.is_alive()] == []


# ---------------------------------------------------------------------------------------------
# Strands
# ---------------------------------------------------------------------------------------------

INVOKE_SPEC = {
    "name": "invoke",
    "description": "Run code and return its output",
    "inputSchema": {
        "json": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}
    },
}


def _invoke_tool(calls: list[dict[str, Any]]):
    from strands.tools import PythonAgentTool

    def invoke(tool_use: dict[str, Any], **_: Any) -> dict[str, Any]:
        calls.append(tool_use)
        return {"toolUseId": tool_use["toolUseId"], "status": "success", "content": [{"text": "2"}]}

    return PythonAgentTool("invoke", INVOKE_SPEC, invoke)


def _model(fake: FakeBedrock, streaming: bool, **config: Any):
    from botocore.config import Config
    from strands.models import BedrockModel

    model = BedrockModel(
        model_id=MODEL,
        endpoint_url=fake.endpoint_url,
        region_name="us-east-1",
        streaming=streaming,
        # botocore must not retry on its own, so Strands' retry strategy sees every throttle
        boto_client_config=Config(retries={"mode": "standard", "total_max_attempts": 1}, read_timeout=30),
        **config,
    )
    fake.track_client(model.client)
    return model


@pytest.mark.parametrize("streaming", [True, False])
def test_strands_tool_call_then_answer(fake: FakeBedrock, streaming: bool) -> None:
    from strands import Agent

    fake.add_turns(
        {
            "text": "I'll run it.",
            "tool_uses": [{"name": "invoke", "input": {"code": "1+1"}, "id": "call-1"}],
            "usage": {"inputTokens": 100, "outputTokens": 20},
        },
        {"text": "The answer is 2.", "usage": {"inputTokens": 130, "outputTokens": 7}},
    )
    calls: list[dict[str, Any]] = []
    agent = Agent(
        model=_model(fake, streaming, max_tokens=512, temperature=0.1),
        tools=[_invoke_tool(calls)],
        system_prompt="You are terse.",
        callback_handler=None,
    )
    result = agent("What is 1+1?")

    assert str(result).strip() == "The answer is 2."
    assert result.stop_reason == "end_turn"
    assert calls == [{"toolUseId": "call-1", "name": "invoke", "input": {"code": "1+1"}}]
    assert result.metrics.accumulated_usage["inputTokens"] == 230
    assert result.metrics.accumulated_usage["outputTokens"] == 27
    run_usage = result.metrics.latest_agent_invocation.usage  # this run only
    assert (run_usage["inputTokens"], run_usage["outputTokens"], run_usage["totalTokens"]) == (230, 27, 257)

    first, second = fake.requests
    assert {first.operation, second.operation} == {"ConverseStream" if streaming else "Converse"}
    assert first.system == [{"text": "You are terse."}]
    assert first.tool_names == ["invoke"]
    assert first.tool_config["tools"][0]["toolSpec"]["inputSchema"]["json"]["required"] == ["code"]
    assert first.inference_config == {"maxTokens": 512, "temperature": 0.1}
    assert first.messages == [{"role": "user", "content": [{"text": "What is 1+1?"}]}]
    # The second call carries the assistant's toolUse and our toolResult.
    assistant, tool_result = second.messages[1], second.messages[2]
    assert {"toolUse": {"toolUseId": "call-1", "name": "invoke", "input": {"code": "1+1"}}} in assistant["content"]
    assert tool_result["content"][0]["toolResult"]["toolUseId"] == "call-1"
    assert tool_result["content"][0]["toolResult"]["content"] == [{"text": "2"}]
    assert all(r.has_authorization for r in fake.requests)


def test_strands_stream_async_reasoning_and_text_deltas(fake: FakeBedrock) -> None:
    from strands import Agent

    fake.add_turns({"reasoning": "Simple arithmetic.", "reasoning_signature": "s", "text": "It is two."})
    agent = Agent(model=_model(fake, True), callback_handler=None)

    async def collect() -> list[dict[str, Any]]:
        return [event async for event in agent.stream_async("1+1?")]

    events = asyncio.run(collect())
    reasoning = "".join(e["reasoningText"] for e in events if "reasoningText" in e)
    text = "".join(e["data"] for e in events if "data" in e)
    assert reasoning == "Simple arithmetic." and text == "It is two."
    assert len([e for e in events if "data" in e]) > 1
    result = events[-1]["result"]
    assert result.message["content"][0]["reasoningContent"]["reasoningText"] == {
        "text": "Simple arithmetic.",
        "signature": "s",
    }


@pytest.mark.parametrize("streaming", [True, False])
def test_strands_throttling_then_success(fake: FakeBedrock, streaming: bool) -> None:
    from strands import Agent, ModelRetryStrategy
    from strands.hooks import AfterModelCallEvent, BeforeModelCallEvent

    fake.add_turns({"error": "ThrottlingException"}, {"error": "ThrottlingException"}, "Finally.")
    seen: list[tuple[str, Any]] = []
    callbacks: list[dict[str, Any]] = []

    agent = Agent(
        model=_model(fake, streaming),
        retry_strategy=ModelRetryStrategy(initial_delay=0, max_attempts=3),
        callback_handler=lambda **kwargs: callbacks.append(kwargs),
    )
    agent.add_hook(lambda event: seen.append(("before", None)), BeforeModelCallEvent)
    agent.add_hook(
        lambda event: seen.append(("after", type(event.exception).__name__ if event.exception else None)),
        AfterModelCallEvent,
    )
    result = agent("hi")

    assert str(result).strip() == "Finally."
    assert len(fake.requests) == 3
    assert seen == [
        ("before", None),
        ("after", "ModelThrottledException"),
        ("before", None),
        ("after", "ModelThrottledException"),
        ("before", None),
        ("after", None),
    ]
    assert [c["event_loop_throttled_delay"] for c in callbacks if "event_loop_throttled_delay" in c] == [0, 0]


def test_strands_retries_exhausted_and_access_denied(fake: FakeBedrock) -> None:
    from botocore.exceptions import ClientError
    from strands import Agent, ModelRetryStrategy
    from strands.types.exceptions import ModelThrottledException

    fake.add_turns({"error": "ThrottlingException"}, {"error": "ThrottlingException"})
    agent = Agent(
        model=_model(fake, True),
        retry_strategy=ModelRetryStrategy(initial_delay=0, max_attempts=2),
        callback_handler=None,
    )
    with pytest.raises(ModelThrottledException):
        agent("hi")

    fake.add_turns({"error": "AccessDeniedException"})
    agent = Agent(model=_model(fake, True), callback_handler=None)
    with pytest.raises(ClientError) as caught:
        agent("hi")
    assert caught.value.response["Error"]["Code"] == "AccessDeniedException"
    assert len(fake.requests) == 3


def test_strands_cancel_mid_stream_returns_before_the_stream_ends(fake: FakeBedrock) -> None:
    """agent.cancel() while the HTTP stream is stalled: the run ends without waiting for it."""
    from strands import Agent

    # messageStart + 3 text deltas, then the server stalls
    fake.add_turns({"text": "a long answer that stalls halfway through", "chunk_size": 4, "hang_after": 4})
    agent = Agent(model=_model(fake, True), callback_handler=None)
    observed: dict[str, Any] = {"deltas": []}

    async def run() -> None:
        async for event in agent.stream_async("hi"):
            if "data" in event:
                observed["deltas"].append(event["data"])
                if len(observed["deltas"]) == 3:
                    # Strands' reader thread has handed over everything sent and now waits
                    # for the next chunk, which the server withholds.
                    assert await asyncio.to_thread(fake.wait_hanging)
                    agent.cancel()
            if "result" in event:
                observed["stop_reason"] = event["result"].stop_reason
                observed["still_hanging"] = fake.hanging  # the server never sent the rest
        fake.release()  # lets Strands' detached reader thread finish

    asyncio.run(run())
    assert observed == {"deltas": ["a lo", "ng a", "nswe"], "stop_reason": "cancelled", "still_hanging": 1}
    assert fake.wait_streams_ended()
    assert "stalls" not in json.dumps(agent.messages)  # the partial message was discarded
