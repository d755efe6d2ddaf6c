"""Call-time config is the top of the cascade for prompt skills too: an ``endpoint_url``
given as ``invoke(prompt_skill, config={"model": ...})`` is the one agent-strands uses,
over the skill's own ``metadata.model``. Real Strands and boto3, two local fake Bedrocks."""

from __future__ import annotations

import importlib.util
import json

import pytest

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
    for name, value in dummy_aws_env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_BEARER_TOKEN_BEDROCK", raising=False)


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
