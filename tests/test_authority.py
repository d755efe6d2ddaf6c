"""The authority of deferred work (agent_apps/authority.py): whether allowed-tools narrow
others, whether a maker could make a call directly, and stored work run under it."""

from __future__ import annotations

import pytest

from agent_apps import ToolNotAllowed
from agent_apps.authority import Authority, check_call_as, invoke_as, narrows
from agent_apps.skill import Skill

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
