"""agent-strands for real, offline: real Strands and boto3 over HTTP to a local fake Bedrock.

The conformance suite (tests/agent/test_conformance.py) runs against this provider too;
these tests cover what is specific to it: what reaches the model, retries through the
hook, clear errors, cancellation of a stream in flight, token usage, other providers.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import signal
import subprocess
import sys

import pytest

from agent_apps import AgentAppsError, ArgsInvalid, Cancelled, Signal
from agent_apps.testing import default_sigint
from agent_apps.testing.bedrock import FakeBedrock, dummy_aws_env

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(
        importlib.util.find_spec("strands") is None or importlib.util.find_spec("boto3") is None,
        reason="needs the 'strands' extra",
    ),
]

MODEL = "anthropic.claude-fake-v1:0"


@pytest.fixture
def aws(monkeypatch):
    """Dummy AWS credentials; no profile, no config files, no instance metadata."""
    for name, value in dummy_aws_env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_BEARER_TOKEN_BEDROCK", raising=False)


@pytest.fixture
def bedrock(aws):
    with FakeBedrock(model_ids=[MODEL]) as fake:
        yield fake


@pytest.fixture
def events(context_manager):
    got = []
    context_manager.events.subscribe("strands-test", lambda topic, event: got.append(event))
    return got


@pytest.fixture
def run(context_manager, bedrock):
    """``await run(config=..., **agent_args)``: the agent's result, with the fake as the model."""

    async def run(*, config=None, signal=None, **args):
        call = {"prompt": "You are a test agent.", "user_message": "Do the test.", "events": "strands-test", **args}
        call["config"] = {
            "agent": "agent-strands",
            "model_id": MODEL,
            "endpoint_url": bedrock.endpoint_url,
            "region": "us-east-1",
            "retry_delay": 0,
            **(config or {}),
        }
        return await context_manager.invoke("agent", call, signal=signal)

    return run


def invoke(*codes, text=None, **extra):
    turn = {"tool_uses": [{"name": "invoke", "input": {"code": code}} for code in codes], **extra}
    if text:
        turn["text"] = text
    return turn


def of_type(events, kind):
    return [e for e in events if e["type"] == kind]


def tool_results(request):
    """The toolResult blocks of the last message of a recorded request."""
    return [block["toolResult"] for block in request.messages[-1]["content"] if "toolResult" in block]


# -- what reaches the model -------------------------------------------------------------------


async def test_request_carries_prompt_tool_and_inference_config(run, bedrock):
    bedrock.add_turns(invoke("print(6 * 7)", text="Computing."), {"text": "It is 42."})
    result = await run(config={"temperature": 0.25, "max_tokens": 321})
    assert result == "It is 42."
    first, second = bedrock.requests
    assert first.operation == "ConverseStream" and first.model_id == MODEL
    assert first.has_authorization  # signed with the dummy credentials, through the real botocore
    assert "You are a test agent." in first.system[0]["text"]
    assert first.messages == [{"role": "user", "content": [{"text": "Do the test."}]}]
    assert first.tool_names == ["invoke"]
    schema = first.tool_config["tools"][0]["toolSpec"]["inputSchema"]["json"]
    assert schema["required"] == ["code"] and schema["properties"]["code"]["type"] == "string"
    assert first.inference_config == {"temperature": 0.25, "maxTokens": 321}
    (result_block,) = tool_results(second)
    assert result_block["status"] == "success" and result_block["content"] == [{"text": "42"}]


async def test_attachments_are_converse_image_and_document_blocks_in_this_run_and_the_next(context_manager, bedrock):
    import base64

    png = b"\x89PNG\r\n\x1a\n" + bytes(40)
    bedrock.add_turns({"text": "A chart."}, {"text": "Still a chart."})
    config = {"agent": "agent-strands", "model_id": MODEL, "endpoint_url": bedrock.endpoint_url, "region": "us-east-1"}
    call = {"prompt": "P", "user_message": "What is this?", "config": config}
    attached = [png, b"# Notes\nread me\n"]
    assert await context_manager.invoke("agent", call, attachments=attached, session="att") == "A chart."
    blocks = [
        {"text": "What is this?"},
        {"image": {"format": "png", "source": {"bytes": base64.b64encode(png).decode()}}},
        {"document": {"format": "txt", "name": "attachment-2-txt", "source": {"bytes": "IyBOb3RlcwpyZWFkIG1lCg=="}}},
    ]
    assert bedrock.requests[0].messages == [{"role": "user", "content": blocks}]
    # a document's name as Bedrock takes it (no dots); the session keeps them: the next
    # run of the session sends them again with its history
    again = {**call, "user_message": "And now?"}
    assert await context_manager.invoke("agent", again, session="att") == "Still a chart."
    assert bedrock.requests[1].messages[0] == {"role": "user", "content": blocks}


async def test_non_streaming_converse_works(run, bedrock, events):
    bedrock.add_turns(invoke("print('hi')"), {"text": "Said hi."})
    assert await run(config={"streaming": False}) == "Said hi."
    assert [r.operation for r in bedrock.requests] == ["Converse", "Converse"]
    assert of_type(events, "tool-result")[0]["result"] == "hi"


async def test_thinking_is_bedrock_extended_thinking_with_room_for_the_answer(run, bedrock, events):
    bedrock.add_turns({"reasoning": "Think first.", "text": "Thought."}, {"text": "Again."})
    config = {"thinking": {"budget_tokens": 2048}, "params": {"top_k": 5}}
    assert await run(config=config) == "Thought."
    body = bedrock.requests[0].body
    assert body["additionalModelRequestFields"] == {"top_k": 5, "thinking": {"type": "enabled", "budget_tokens": 2048}}
    assert body["inferenceConfig"]["maxTokens"] == 2048 + 4096  # the answer keeps its default room
    assert "".join(e["text"] for e in of_type(events, "agent-message") if e.get("reasoning")) == "Think first."
    # a max_tokens above the budget is kept as it is
    assert await run(config={"thinking": {"budget_tokens": 2048}, "max_tokens": 3000}) == "Again."
    assert bedrock.requests[1].body["inferenceConfig"]["maxTokens"] == 3000


async def test_a_thinking_budget_below_anthropics_minimum_is_refused_before_any_call(run, bedrock):
    with pytest.raises(ArgsInvalid, match=r"config.thinking.budget_tokens.*at least 1024"):
        await run(config={"thinking": {"budget_tokens": 100}})
    assert bedrock.requests == []


async def test_text_and_reasoning_stream_as_deltas(run, bedrock, events):
    bedrock.add_turns({"reasoning": "The user wants a greeting.", "text": "Hello there, friend!", "chunk_size": 5})
    assert await run() == "Hello there, friend!"
    messages = of_type(events, "agent-message")
    texts = [e["text"] for e in messages if not e.get("reasoning")]
    thoughts = [e["text"] for e in messages if e.get("reasoning")]
    assert len(texts) > 1 and "".join(texts) == "Hello there, friend!"
    assert all(e["delta"] for e in messages)
    assert "".join(thoughts) == "The user wants a greeting."


async def test_usage_per_turn_in_the_trace_and_the_final_event(run, bedrock, events, context_manager):
    bedrock.add_turns(
        invoke("x = 1", usage={"inputTokens": 120, "outputTokens": 15}),
        {"text": "Done.", "usage": {"inputTokens": 160, "outputTokens": 4}},
    )
    assert await run() == "Done."
    ends = of_type(events, "turn-end")
    assert [e["usage"] for e in ends] == [
        {"input_tokens": 120, "output_tokens": 15},
        {"input_tokens": 160, "output_tokens": 4},
    ]
    (complete,) = of_type(events, "agent-complete")
    assert complete["usage"] == {"input_tokens": 280, "output_tokens": 19}
    assert complete["turns"] == 2 and complete["steps"] == 1


# -- the hook's directives ---------------------------------------------------------------------


async def test_denied_tool_call_is_not_run_and_the_model_sees_why(run, bedrock, events):
    bedrock.add_turns(
        {"tool_uses": [{"name": "shell", "input": {"command": "rm -rf /"}}]},
        {"text": "I may only use invoke."},
    )
    assert await run() == "I may only use invoke."
    (call,) = of_type(events, "tool-call")
    assert call["tool"] == "shell"
    (error,) = of_type(events, "tool-error")
    assert error["result"].startswith("Tool call denied: unknown tool 'shell'")
    (block,) = tool_results(bedrock.requests[1])
    assert block["status"] == "error"
    assert "Tool call denied: unknown tool 'shell'" in block["content"][0]["text"]


async def test_returns_enforced_with_reminder_and_rejection(run, bedrock):
    returns = {"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]}
    bedrock.add_turns(
        {"text": "There are three."},  # no finish(): the policy reminds the model
        invoke("ctx.manager.finish({'count': 'three'})"),  # wrong type: rejected
        invoke("ctx.manager.finish({'count': 3})"),
    )
    assert await run(returns=returns) == {"count": 3}
    assert len(bedrock.requests) == 3
    reminder = bedrock.requests[1].messages[-1]
    assert reminder["role"] == "user" and "finish" in reminder["content"][0]["text"]
    (rejected,) = tool_results(bedrock.requests[2])
    assert rejected["status"] == "error" and "finish() rejected" in rejected["content"][0]["text"]


async def test_persistent_continue_after_a_text_turn_sends_continue(run, bedrock):
    bedrock.add_turns({"text": "Waiting."}, invoke("ctx.manager.finish('done')"))
    # persistent runs never stop on their own: finish() ends this one
    assert await run(config={"persistent": True}) == "done"
    assert bedrock.requests[1].messages[-1] == {"role": "user", "content": [{"text": "Continue."}]}


async def test_context_edit_elides_old_tool_results_only(run, bedrock):
    bedrock.add_turns(
        invoke("print('A' * 500)"),
        invoke("print('B' * 500)"),
        invoke("print('C' * 500)"),
        {"text": "Done."},
    )
    assert await run(config={"context_edit": True, "context_keep": 2}) == "Done."
    last = bedrock.requests[-1].messages
    assert last[0] == {"role": "user", "content": [{"text": "Do the test."}]}
    results = [b["toolResult"]["content"][0]["text"] for m in last for b in m["content"] if "toolResult" in b]
    assert results[0] == results[1] == "[elided: 500 characters]"
    assert results[2] == "C" * 500
    assert all(m["content"] for m in last if m["role"] == "assistant")  # assistant turns untouched


async def test_without_context_edit_the_conversation_is_verbatim(run, bedrock):
    bedrock.add_turns(invoke("print('A' * 500)"), invoke("print('B' * 500)"), {"text": "Done."})
    assert await run() == "Done."
    results = [
        b["toolResult"]["content"][0]["text"]
        for m in bedrock.requests[-1].messages
        for b in m["content"]
        if "toolResult" in b
    ]
    assert results == ["A" * 500, "B" * 500]


# -- retries through the hook ---------------------------------------------------------------------


async def test_throttling_then_success(run, bedrock, events):
    bedrock.add_turns({"error": "ThrottlingException"}, {"error": "ThrottlingException"}, {"text": "Finally."})
    assert await run() == "Finally."
    assert len(bedrock.requests) == 3  # botocore did not retry on its own: the policy did
    errors = [e for e in of_type(events, "agent-error") if not e.get("retrying")]
    assert [e["attempt"] for e in errors] == [1, 2]
    assert errors[0]["error"]["type"] == "ThrottlingException" and errors[0]["error"]["retryable"] is True
    assert [e["attempt"] for e in of_type(events, "agent-error") if e.get("retrying")] == [1, 2]
    assert len(of_type(events, "turn-start")) == 1  # retries stay within the turn


async def test_mid_stream_error_is_retried(run, bedrock):
    bedrock.add_turns({"text": "partial answ", "error": "ModelStreamErrorException"}, {"text": "Whole answer."})
    assert await run() == "Whole answer."
    assert bedrock.requests[0].stream_outcome == "error"


async def test_throttling_beyond_max_retries_is_one_clear_line(run, bedrock):
    bedrock.add_turns(*[{"error": "ThrottlingException"}] * 4)
    with pytest.raises(AgentAppsError) as info:
        await run(config={"max_retries": 2})
    assert type(info.value).__name__ == "ProviderError"
    assert "throttling" in str(info.value) and "\n" not in str(info.value)
    assert len(bedrock.requests) == 3


# -- clear errors --------------------------------------------------------------------------------


def one_line(exc):
    text = str(exc)
    assert "\n" not in text and "Traceback" not in text
    assert isinstance(exc, AgentAppsError) and type(exc).__name__ == "ProviderError"
    return text


async def test_access_denied(run, bedrock):
    bedrock.add_turns({"error": "AccessDeniedException"})
    with pytest.raises(AgentAppsError) as info:
        await run()
    text = one_line(info.value)
    assert "access denied" in text and "Model access" in text and MODEL in text


async def test_unknown_model(run, bedrock):
    with pytest.raises(AgentAppsError) as info:
        await run(config={"model_id": "anthropic.no-such-model"})
    text = one_line(info.value)
    assert "unknown model 'anthropic.no-such-model'" in text and "model.model_id" in text


async def test_unknown_region(run):
    with pytest.raises(AgentAppsError) as info:
        await run(config={"endpoint_url": None, "region": "xx-nowhere-1"})
    text = one_line(info.value)
    assert "region 'xx-nowhere-1'" in text and "model.region" in text


async def test_missing_credentials(run, monkeypatch):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name)
    with pytest.raises(AgentAppsError) as info:
        await run()
    text = one_line(info.value)
    assert "no AWS credentials" in text and "AWS_PROFILE" in text


async def test_unknown_profile(run):
    with pytest.raises(AgentAppsError) as info:
        await run(config={"profile": "no-such-profile"})
    text = one_line(info.value)
    assert "profile 'no-such-profile'" in text


async def test_unknown_provider(run):
    with pytest.raises(AgentAppsError, match="unknown model.provider 'palm'"):
        await run(config={"provider": "palm"})


# -- cancellation ----------------------------------------------------------------------------------


async def test_cancellation_cuts_a_stream_in_progress(run, bedrock, events):
    bedrock.add_turns({"text": "I am thinking about this for a long time", "chunk_size": 4, "hang_after": 4})
    signal = Signal()
    task = asyncio.ensure_future(run(signal=signal))
    assert await asyncio.to_thread(bedrock.wait_hanging, 20)
    signal.cancel("user pressed stop")
    with pytest.raises(Cancelled, match="user pressed stop"):
        await asyncio.wait_for(task, 20)
    # the HTTP stream was cut from our side, not left to the read timeout
    assert await asyncio.to_thread(bedrock.wait_streams_ended, 20)
    assert bedrock.requests[0].stream_outcome == "client_disconnected"


async def test_cancelling_the_task_also_cuts_the_stream(run, bedrock):
    # Ctrl-C cancels the asyncio task, not the signal: the stream must not outlive the run,
    # or asyncio.run() would wait for the stalled reader thread at shutdown
    bedrock.add_turns({"text": "I am thinking about this for a long time", "chunk_size": 4, "hang_after": 4})
    task = asyncio.ensure_future(run())
    assert await asyncio.to_thread(bedrock.wait_hanging, 20)
    task.cancel()
    with pytest.raises((asyncio.CancelledError, Cancelled)):
        await task
    assert await asyncio.to_thread(bedrock.wait_streams_ended, 20)
    assert bedrock.requests[0].stream_outcome == "client_disconnected"


def test_ctrl_c_in_the_cli_stops_a_hanging_stream(tmp_path, aws, bedrock, write_skill):
    bedrock.add_turns({"text": "slow", "hang_after": 2})
    skills = write_skill(
        "slow-agent.skill.md",
        f"""
        ---
        description: An agent whose model never finishes.
        metadata:
          model:
            model_id: {MODEL}
            endpoint_url: {bedrock.endpoint_url}
            region: us-east-1
            read_timeout: 600
        ---
        Do it.
        """,
    ).parent
    env = {**os.environ, "AGENT_APPS_HOME": str(tmp_path / "home")}
    process = subprocess.Popen(
        [sys.executable, "-m", "agent_apps", "invoke", "slow-agent", "--path", str(skills)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )
    try:
        assert bedrock.wait_hanging(30), process.stderr.read() if process.poll() is not None else "no hang"
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=120)  # a hang guard: without the cut, read_timeout
    finally:
        process.kill()
    assert process.returncode == 130, err
    assert bedrock.requests[0].stream_outcome == "client_disconnected"


async def test_cancellation_during_retry_backoff(run, bedrock, events):
    bedrock.add_turns({"error": "ThrottlingException"}, {"text": "never"})
    signal = Signal()
    task = asyncio.ensure_future(run(signal=signal, config={"retry_delay": 60}))
    for _ in range(500):
        if any(e.get("retrying") for e in events):
            break
        await asyncio.sleep(0.02)
    signal.cancel("stop waiting")
    with pytest.raises(Cancelled):
        await asyncio.wait_for(task, 20)
    assert len(bedrock.requests) == 1


# -- laziness --------------------------------------------------------------------------------------


def test_describing_the_provider_imports_nothing_heavy(tmp_path):
    code = (
        "import sys\n"
        "from agent_apps.cli import main\n"
        "main(['describe', 'agent-strands'])\n"
        "print(sorted(m for m in ('strands', 'boto3', 'botocore') if m in sys.modules))\n"
    )
    env = {**os.environ, "AGENT_APPS_HOME": str(tmp_path / "home")}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert "agent-strands" in out.stdout
    assert out.stdout.strip().splitlines()[-1] == "[]"


# -- other providers (end to end: tests/extensions/test_model_providers.py) -----------------------


@pytest.fixture
def models_module(monkeypatch):
    """extensions/agent/strands/models.py, imported on its own, in a package of its own
    (for its relative imports)."""
    import importlib.util as util
    import types
    from pathlib import Path

    folder = Path(__file__).resolve().parents[2] / "extensions" / "agent" / "strands"
    package = types.ModuleType("agent_strands_under_test")
    package.__path__ = [str(folder)]
    monkeypatch.setitem(sys.modules, package.__name__, package)
    monkeypatch.delitem(sys.modules, f"{package.__name__}.wire", raising=False)
    spec = util.spec_from_file_location(f"{package.__name__}.models", folder / "models.py")
    module = util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def stub_model_class(monkeypatch):
    """Replace ``strands.models.<name>.<cls>`` with a stub that records its arguments."""
    import types

    def install(name, cls):
        class Stub:
            def __init__(self, **kwargs):
                self.kwargs = kwargs

        module = types.ModuleType(f"strands.models.{name}")
        setattr(module, cls, Stub)
        monkeypatch.setitem(sys.modules, f"strands.models.{name}", module)
        return Stub

    return install


def test_other_providers_need_a_model_id(models_module, stub_model_class):
    stub_model_class("openai", "OpenAIModel")
    with pytest.raises(AgentAppsError, match="needs model.model_id"):
        models_module.build_model({"provider": "openai"})


# -- call-time config (the top of the cascade, for prompt skills too) -------------------------


async def test_call_config_endpoint_wins_over_the_skills_metadata(aws, context_manager, write_skill):
    with FakeBedrock(model_ids=[MODEL]) as metadata_fake, FakeBedrock(model_ids=[MODEL]) as call_fake:
        model = {
            "agent": "agent-strands",
            "model_id": MODEL,
            "region": "us-east-1",
            "endpoint_url": metadata_fake.endpoint_url,
            "max_retries": 0,
        }
        write_skill(
            "greeter.skill.md", f"---\ndescription: Greets.\nmetadata:\n  model: {json.dumps(model)}\n---\nGreet.\n"
        )
        call_fake.add_turns({"text": "Hello from the call's endpoint."})
        result = await context_manager.invoke(
            "greeter", {"task": "greet"}, config={"model": {"endpoint_url": call_fake.endpoint_url}}
        )
        assert result == "Hello from the call's endpoint."
        assert len(call_fake.requests) == 1 and metadata_fake.requests == []
        assert call_fake.requests[0].model_id == MODEL  # the rest of metadata.model still applies


async def test_call_config_reaches_a_prompt_skill_without_model_metadata(aws, context_manager, write_skill):
    write_skill("plain.skill.md", "---\ndescription: Plain.\n---\nAnswer.\n")
    with FakeBedrock(model_ids=[MODEL]) as fake:
        fake.add_turns({"text": "Answered."})
        model = {"agent": "agent-strands", "model_id": MODEL, "region": "us-east-1", "endpoint_url": fake.endpoint_url}
        assert await context_manager.invoke("plain", config={"model": model}) == "Answered."
        assert len(fake.requests) == 1


# -- sessions ---------------------------------------------------------------------------------


async def test_the_second_run_of_a_session_sends_the_first_runs_turns(context_manager, bedrock):
    config = {
        "agent": "agent-strands",
        "model_id": MODEL,
        "endpoint_url": bedrock.endpoint_url,
        "region": "us-east-1",
        "retry_delay": 0,
    }
    bedrock.add_turns(invoke("print(6 * 7)", text="Computing."), {"text": "It is 42."})
    bedrock.add_turns({"text": "You asked for 6 * 7."})
    first = {"prompt": "You are a test agent.", "user_message": "What is 6 * 7?", "config": config}
    assert await context_manager.invoke("agent", first, session="math") == "It is 42."
    second = {**first, "user_message": "What did I ask?"}
    assert await context_manager.invoke("agent", second, session="math") == "You asked for 6 * 7."
    request = bedrock.requests[2]
    use_id = bedrock.requests[1].messages[1]["content"][1]["toolUse"]["toolUseId"]
    assert request.messages == [
        {"role": "user", "content": [{"text": "What is 6 * 7?"}]},
        {
            "role": "assistant",
            "content": [
                {"text": "Computing."},
                {"toolUse": {"toolUseId": use_id, "name": "invoke", "input": {"code": "print(6 * 7)"}}},
            ],
        },
        {
            "role": "user",
            "content": [{"toolResult": {"toolUseId": use_id, "content": [{"text": "42"}], "status": "success"}}],
        },
        {"role": "assistant", "content": [{"text": "It is 42."}]},
        {"role": "user", "content": [{"text": "What did I ask?"}]},
    ]
    # the report has what the provider measured
    (run, _) = context_manager.state.runs.list(session="math")
    (node,) = context_manager.state.runs.agents(run.id)
    (step,) = node.report["steps"]
    assert step["finish_reason"] == "end_turn" and step["model_latency_ms"] > 0 and step["usage"]["input_tokens"] > 0


def test_a_window_cut_through_tool_pairs_stays_a_valid_conversation():
    spec = importlib.util.spec_from_file_location(
        "strands_history", os.path.join(os.path.dirname(__file__), "../../extensions/agent/strands/history.py")
    )
    history = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(history)
    call = {"id": "t1", "name": "invoke", "input": {"code": "x"}}
    window = [
        {"role": "tool", "tool_call_id": "t0", "text": "orphan result"},  # its call was cut off
        {"role": "assistant", "text": "", "tool_calls": [call, {"id": "t2", "name": "invoke", "input": {}}]},
        {"role": "tool", "tool_call_id": "t1", "text": "ok"},  # t2 never answered (crash)
        {"role": "summary", "text": "earlier"},
        {"role": "assistant", "text": "   "},  # blank: dropped
    ]
    out = history.to_converse(window, "next")
    assert out == [
        {"role": "user", "content": [{"text": history.OMITTED}]},
        {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t1", "name": "invoke", "input": call["input"]}}]},
        {
            "role": "user",
            "content": [
                {"toolResult": {"toolUseId": "t1", "content": [{"text": "ok"}], "status": "success"}},
                {"text": "[Previous conversation summary: earlier]"},
                {"text": "next"},
            ],
        },
    ]
    roles = [m["role"] for m in out]
    assert all(a != b for a, b in zip(roles, roles[1:], strict=False))


# -- prompt caching ---------------------------------------------------------------------------


async def test_a_cache_point_follows_the_stable_prefix_across_turns_and_runs(context_manager, bedrock, tmp_path):
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "IDENTITY.md").write_text("# Ada\n\nI am **Ada**, a careful assistant.\n")
    (workspace / "MEMORY.md").write_text("## Facts\n\n- The user's cat is called Miso.\n- The user's car is blue.\n")
    config = {"workspace": str(workspace)}
    for message in ("What is my cat called?", "Which colour is my car?"):
        bedrock.add_turns(invoke("print(1)"), {"text": "Done."})
        await context_manager.invoke("agent", {"prompt": "You are a test agent.", "user_message": message,
                                               "config": {"agent": "agent-strands", "model_id": MODEL,
                                                          "endpoint_url": bedrock.endpoint_url,
                                                          "region": "us-east-1", **config}})
    systems = [request.system for request in bedrock.requests]
    assert len(systems) == 4  # two runs of two model calls each
    for system in systems:
        assert [list(block) for block in system] == [["text"], ["cachePoint"], ["text"]]
        assert system[1] == {"cachePoint": {"type": "default"}}
    stable = {system[0]["text"] for system in systems}
    assert len(stable) == 1  # byte for byte the same: both turns of both runs
    (prefix,) = stable
    assert prefix.startswith("You are a test agent.") and "I am Ada, a careful assistant." in prefix
    assert "async def" in prefix and "Miso" not in prefix  # stubs are stable, memory is not
    assert systems[0][2] == systems[1][2] and "Miso" in systems[0][2]["text"]  # same run: same memory
    assert "blue" in systems[2][2]["text"] and "[MEMORY]" in systems[2][2]["text"]


async def test_no_cache_point_where_the_model_cannot_cache(run, bedrock):
    bedrock.add_turns({"text": "Done."})
    await run(config={"prompt_cache": False})
    (request,) = bedrock.requests
    assert [list(block) for block in request.system] == [["text"]]
