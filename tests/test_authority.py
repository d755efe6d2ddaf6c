"""The authority of deferred work (agent_apps/authority.py): whether allowed-tools narrow
others, whether a maker could make a call directly, and stored work run under it; and
what agent code may ask of a sub-agent, through real runs of scripted agent code."""

from __future__ import annotations

import json

import pytest

from agent_apps import ToolNotAllowed
from agent_apps.authority import Authority, check_call_as, invoke_as, narrows
from agent_apps.config import key_table
from agent_apps.skill import Skill
from agent_apps.testing import probe_model

pytestmark = pytest.mark.anyio

SKILLS = {
    "file-read": Skill(name="file-read"),
    "file-write": Skill(name="file-write"),
    "secret-job": Skill(name="secret-job", metadata={"visibility": "hidden"}),
    "agent": Skill(name="agent"),
    "agent-scripted": Skill(name="agent-scripted", metadata={"tags": ["meta-internal", "provider"]}),
}


@pytest.mark.parametrize(
    ("requested", "own", "expected"),
    [
        ("file-read", "file-read", True),  # the same
        ("file-read", "file-*", True),  # a skill the glob matches
        ("file-read(path=docs/*)", "file-read", True),  # more constrained
        ("file-*", "file-*", True),
        ("", "file-read", True),  # nothing at all
        ("anything secret-job", "*", True),  # a bare * allows everything
        ("file-read", None, True),  # a visible skill, of every visible one
        ("file-*", None, True),  # globs match visible skills only
        ("file-read", "file-read(path=docs/*)", False),  # drops a constraint
        ("file-*", "file-read", False),  # a glob wider than a name
        ("file-read shell", "file-*", False),  # one spec too many
        ("secret-job", "file-*", False),  # a glob never matches a hidden skill
        ("no-such-skill", "file-*", False),  # a name that means nothing yet may mean anything later
        ("*", None, False),  # every skill, hidden ones too
        ("secret-job", None, False),  # hidden: not among the visible ones
        (None, "file-read", False),  # every visible skill
        ("file-read(", "file-read", False),  # does not parse
        ("file-read", "file-read(", False),  # nothing parses: nothing is allowed
        ("file-read", "file-* *(path=x)", True),
        ("secret-job", "*(x=y)", False),  # a constrained * does not cover an unconstrained spec
    ],
)
def test_narrows(requested, own, expected):
    assert narrows(requested, own, SKILLS) is expected


def test_a_maker_can_ask_for_no_more_than_it_could_call_directly():
    agent_code = Authority("agent file-*", untrusted=True, by="agent code of x")
    check_call_as(agent_code, SKILLS["agent"], {"prompt": "p", "allowed_tools": "file-read"}, SKILLS)
    refusals = {
        "allowed_tools": (SKILLS["agent"], {"allowed_tools": "*"}),
        "config.endpoint_url": (SKILLS["agent"], {"config": {"endpoint_url": "http://127.0.0.1:9"}}),
        "config.agent": (SKILLS["agent"], {"config": {"agent": "file-read"}}),
        None: (SKILLS["secret-job"], {}),
    }
    for path, (target, args) in refusals.items():
        with pytest.raises(ToolNotAllowed) as info:
            check_call_as(agent_code, target, args, SKILLS)
        assert info.value.path == path, (path, info.value)
    with pytest.raises(ToolNotAllowed, match="internal skills"):
        check_call_as(Authority("*", untrusted=True), SKILLS["agent-scripted"], {}, SKILLS)
    # a skill (not agent code) may start whatever agent its allowed-tools allow
    check_call_as(Authority("agent", by="my-setup"), SKILLS["agent"], {"allowed_tools": "*"}, SKILLS)


def test_an_authority_round_trips_as_json():
    authority = Authority("schedule-create(ref=my-*) my-*", True, "agent code of nightly")
    assert Authority.from_json(authority.to_json()) == authority
    assert Authority.from_json(None) is None


async def test_stored_work_runs_as_the_child_of_a_stand_in_for_its_maker(context_manager, write_skill):
    write_skill(
        "who-called",
        """
        frontmatter = {"description": "Says who called it."}
        async def main(ctx, args):
            caller = ctx.parent
            return {"caller": caller.skill.name, "allowed": caller.skill.allowed_tools,
                    "untrusted": bool(caller.internals.get("untrusted"))}
        """,
    )
    write_skill("other", 'frontmatter = {"description": "Another."}\nasync def main(ctx, args):\n    return 1\n')
    maker = Authority("who-called", untrusted=True, by="agent code of x")
    seen = await invoke_as(context_manager, maker, "who-called", {})
    assert seen == {"caller": "agent-code", "allowed": "who-called", "untrusted": True}
    with pytest.raises(ToolNotAllowed, match="agent-code may not call other"):
        await invoke_as(context_manager, maker, "other", {})
    # without an authority (made from Python or the command line): a top-level call
    assert await invoke_as(context_manager, None, "other", {}) == 1


async def test_a_skill_registers_no_prompt_skill_wider_than_itself(context_manager, write_skill):
    write_skill(
        "my-registrar",
        """
        frontmatter = {"description": "Registers.", "allowed-tools": "skill-register file-*",
                       "params": {"type": "object"}}
        async def main(ctx, args):
            definition = {"description": "d", "body": "b", **args["extra"]}
            return await ctx.manager.invoke("skill-register", {"name": args["name"], "definition": definition})
        """,
    )
    allow = {"security": {"policy": {"allow": ["skill-register"]}}}
    with pytest.raises(ToolNotAllowed, match=r"\(at definition.allowed-tools\): my-registrar may register a prompt"):
        await context_manager.invoke("my-registrar", {"name": "my-shell", "extra": {"allowed-tools": "shell"}},
                                     config=allow)  # fmt: skip
    made = await context_manager.invoke("my-registrar", {"name": "my-reader", "extra": {"allowed-tools": "file-read"}},
                                        config=allow)  # fmt: skip
    assert made["name"] == "my-reader"
    await context_manager.invoke("my-registrar", {"name": "my-same", "extra": {}}, config=allow)
    assert context_manager.get("my-same").allowed_tools == "skill-register file-*"  # its registrant's, by default


# -- what agent code may ask of a sub-agent, through real runs -------------------------------
#
# A scripted model's code, in the sandbox, starts sub-agents with configs, providers and
# allowed-tools; each attempt is allowed or refused as docs/agent.md says.

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
