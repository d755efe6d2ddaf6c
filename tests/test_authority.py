"""What agent code may ask of a sub-agent (agent_apps.authority), through real runs: a
scripted model's code, in the sandbox, starts sub-agents with configs, providers and
allowed-tools, and each attempt is allowed or refused as docs/agent.md says."""

from __future__ import annotations

import json

import pytest

from agent_apps.config import key_table
from agent_apps.testing import probe_model

pytestmark = pytest.mark.anyio

#: docs/agent.md, "What agent code may do": the config keys agent code may set on a
#: sub-agent. A literal on purpose: the test holds the code to the docs.
DOCUMENTED_KEYS = {
    "agent": "agent-scripted",
    "model_id": "m",
    "max_turns": 3,
    "max_steps": 3,
    "temperature": 0.5,
    "max_tokens": 100,
    "top_p": 0.9,
    "script": [{"text": "sub ok"}],
    "stream": False,
    "sandbox": {"timeout": 5},
}

WORD_COUNT = """
frontmatter = {"params": {"type": "object", "properties": {"text": {"type": "string"}}}}
async def main(ctx, args):
    return len(args.get("text", "").split())
"""
SECRET = """
frontmatter = {"metadata": {"visibility": "hidden"}}
async def main(ctx, args):
    return "secret!"
"""
#: A provider skill of the user's: it answers at once with the prompt it was given.
ECHO_PROVIDER = """
frontmatter = {
    "params": {"type": "object"},
    "metadata": {"visibility": "hidden", "tags": ["meta-internal", "provider"]},
}
async def main(ctx, args):
    return "echo: " + args["prompt"]
"""


@pytest.fixture
def cm(context_manager, write_skill):
    write_skill("word-count", WORD_COUNT)
    write_skill("secret", SECRET)
    write_skill("echo-provider", ECHO_PROVIDER)
    return context_manager


def sub(config=None, **args):
    """The probe's call of a scripted sub-agent that answers "sub ok"."""
    config = {"agent": "agent-scripted", "script": [{"text": "sub ok"}], **(config or {})}
    return ("agent", {"prompt": "p", "name": "sub", **args, "config": config})


async def probe(cm, allowed_tools, calls):
    config = probe_model(calls)
    return await cm.invoke("agent", {"prompt": "p", "allowed_tools": allowed_tools, "config": config})


async def test_agent_code_may_set_exactly_the_documented_config_keys(cm):
    known = {path[1] for path in key_table(skills=cm.skills()) if len(path) == 2 and path[0] == "model"}
    others = sorted(known - set(DOCUMENTED_KEYS))
    assert {"journal", "retention", "endpoint_url", "region", "budget", "spawn", "workspace"} <= set(others)
    calls = {"all documented": sub(DOCUMENTED_KEYS)} | {key: sub({key: 1}) for key in others}
    result = await probe(cm, "agent", calls)
    assert result.pop("all documented") == "ok: sub ok"
    for key in others:
        assert result[key].startswith("refused: ") and f"agent code may not set config {key} " in result[key], key


@pytest.mark.parametrize(
    ("provider", "ok"),
    [
        ("agent-scripted", True),  # a bundled provider
        ("echo-provider", True),  # the user's own provider skill
        ("word-count", False),  # a skill, not a provider
        ("secret", False),
        ("agent", False),
        ("no-such-provider", False),
        ("Agent-Scripted", False),  # not a skill name at all
        ("file://echo-provider.skill.py", False),
    ],
)
async def test_a_sub_agents_provider_must_be_a_provider_skill(cm, provider, ok):
    (result,) = (await probe(cm, "agent", {"x": sub({"agent": provider})})).values()
    if ok:
        assert result == "ok: sub ok" or result.startswith("ok: echo: "), result
    else:
        assert result.startswith("refused: ") and f"config.agent {provider!r} is not a provider skill" in result


WIDEN = "may start a sub-agent only with its own allowed-tools"


@pytest.mark.parametrize(
    ("own", "requested", "outcome"),
    [
        # naming `agent` lets agent code start one, with its own allowed-tools only
        ("agent word-count", None, "ok"),
        ("agent word-count", "agent word-count", "ok"),
        ("agent word-count", "*", WIDEN),
        ("agent word-count", "word-count secret", WIDEN),
        ("agent*", "*", WIDEN),
        # a constraint on some other argument of agent says nothing about allowed_tools
        ("agent(prompt=*) word-count", "*", WIDEN),
        ("agent(name=s*)", "secret", WIDEN),
        # nor does a constraint on allowed_tools of some other skill
        ("agent word-count(allowed_tools=*)", "*", WIDEN),
        # a constraint on allowed_tools says which (the pipeline checks it like any)
        ("agent(allowed_tools=word-*)", "word-count", "ok"),
        ("agent(allowed_tools=word-*)", "secret", "does not match 'word-*'"),
        ("agent(allowed_tools=word-*)", "*", "does not match 'word-*'"),
        # a bare * may grant anything
        ("*", "secret", "ok"),
    ],
)
async def test_a_sub_agents_allowed_tools_widen_only_as_the_callers_say(cm, own, requested, outcome):
    args = {} if requested is None else {"allowed_tools": requested}
    (result,) = (await probe(cm, own, {"x": sub(**args)})).values()
    if outcome == "ok":
        assert result == "ok: sub ok"
    else:
        assert result.startswith("refused: ") and outcome in result, result


async def test_a_sub_agent_started_without_allowed_tools_has_its_callers(cm):
    """The sub-agent's own code reaches only what its caller's allowed-tools allow."""
    inner = probe_model({"count": ("word-count", {"text": "a b"}), "secret": ("secret", {}),
                         "read": ("file-read", {"path": "x"})})
    outer = {"sub": ("agent", {"prompt": "p", "config": inner})}
    result = await probe(cm, "agent word-count", outer)
    assert result["sub"].startswith("ok: "), result
    inner_result = json.loads(result["sub"].removeprefix("ok: "))
    assert inner_result["count"] == "ok: 2"
    assert inner_result["secret"].startswith("refused: ") and "not in allowed-tools 'agent word-count'" in inner_result[
        "secret"]
    assert inner_result["read"].startswith("refused: ") and "not in allowed-tools" in inner_result["read"]


async def test_a_sub_agent_gets_the_allowed_tools_its_caller_gave_not_the_callers_own(cm):
    """A caller with ``*`` starts a sub-agent with ``word-count`` only: the sub-agent's
    code reaches word-count and nothing else its caller could."""
    inner = probe_model({"count": ("word-count", {"text": "a b"}), "secret": ("secret", {})})
    outer = {"sub": ("agent", {"prompt": "p", "allowed_tools": "word-count", "config": inner})}
    result = await probe(cm, "*", outer)
    inner_result = json.loads(result["sub"].removeprefix("ok: "))
    assert inner_result["count"] == "ok: 2"
    assert inner_result["secret"].startswith("refused: ") and "not in allowed-tools 'word-count'" in inner_result[
        "secret"]
