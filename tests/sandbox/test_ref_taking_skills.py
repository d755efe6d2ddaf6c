"""Skills that take refs as arguments, called from agent code in the real sandbox
(the scripted provider): allowed-tools argument constraints decide which refs agent
code may pass, and no ref it passes can be more than a bare skill name."""

from __future__ import annotations

import json

import pytest

from agent_apps import ToolNotAllowed

from .test_agent_code import PROBE

pytestmark = pytest.mark.anyio

ALLOW = {"security": {"policy": {"allow": ["schedule-*", "event-*", "skill-register"]}}}

SKILLS = {
    "my-report": """
        frontmatter = {"description": "A report.",
                       "params": {"type": "object", "properties": {"n": {"type": "integer"}}}}
        async def main(ctx, args):
            return args.get("n", 0) * 2
    """,
    "other-report": """
        frontmatter = {"description": "Another report."}
        async def main(ctx, args):
            return 1
    """,
    "hidden-job": """
        frontmatter = {"description": "Hidden.", "metadata": {"visibility": "hidden"}}
        async def main(ctx, args):
            return 1
    """,
    "secret-job": """
        frontmatter = {"description": "Hidden, named.", "metadata": {"visibility": "hidden"}}
        async def main(ctx, args):
            return 1
    """,
    "my-handler": """
        frontmatter = {"description": "Hears events.", "params": {"type": "object"}}
        async def main(ctx, args):
            return None
    """,
}

@pytest.fixture
def skills(write_skill):
    for name, source in SKILLS.items():
        write_skill(name, source)


async def probe(cm, attempts, *, allowed_tools=None):
    call = {
        "prompt": "Test.",
        "user_message": "Go.",
        "config": {"agent": "agent-scripted", "script": [{"code": f"ATTEMPTS = {attempts!r}\n" + PROBE}]},
    }
    if allowed_tools is not None:
        call["allowed_tools"] = allowed_tools
    return await cm.invoke("agent", call, config=ALLOW)


def refused(result, kind="ToolNotAllowed"):
    return result[0] == kind


async def test_schedule_create_ref_constraint_decides_which_refs_agent_code_may_schedule(context_manager, skills):
    out = await probe(context_manager, [
        ("mine", "schedule-create", {"ref": "my-report", "args": {"n": 2}, "every": 60}),
        ("other", "schedule-create", {"ref": "other-report", "every": 60}),
        ("two", "schedule-create", {"ref": "my-report other-report", "every": 60}),
        ("missing", "schedule-create", {"every": 60}),
        ("file", "schedule-create", {"ref": "file:///tmp/my-report.skill.py", "every": 60}),
        ("list", "schedule-list", {}),
    ], allowed_tools="schedule-create(ref=my-*) schedule-list my-*")
    assert out["mine"][0] == "ALLOWED" and out["mine"][1]["ref"] == "my-report"
    for label in ("other", "two", "missing", "file"):
        assert refused(out[label]), (label, out[label])
    assert "schedule-create(ref=my-*)" in out["other"][1]
    (listed,) = out["list"][1]
    assert listed["ref"] == "my-report" and listed["created_by"].startswith("agent code of")
    assert [s.ref for s in context_manager.state.schedules.list()] == ["my-report"]


async def test_agent_code_can_pass_only_bare_names_of_skills_it_may_see(context_manager, skills):
    create = "schedule-create"
    attempts = [
        (label, create, {"ref": ref, "every": 60})
        for label, ref in (
            ("inline", "inline://frontmatter = {}\nasync def main(ctx, args):\n    return 1"),
            ("file", "file:///etc/passwd"),
            ("path", "../skills/my-report.skill.py"),
            ("callback", "callback://hook.abc"),
            ("newline", "my-report\n"),
            ("provider", "agent-scripted"),
            ("executor", "agent-execute"),
            ("hidden", "hidden-job"),
            ("named", "secret-job"),
        )
    ]
    attempts += [
        ("subscribe-file", "event-subscribe", {"topic": "t", "ref": "file:///tmp/x.skill.py"}),
        ("subscribe-internal", "event-subscribe", {"topic": "t", "ref": "context-manager"}),
        ("register-inline", "skill-register", {"name": "my-x", "definition": {"ref": "inline://x"}}),
        ("register-internal", "skill-register", {"name": "my-x", "definition": {"ref": "agent-execute"}}),
    ]
    out = await probe(context_manager, attempts,
                      allowed_tools="schedule-create event-subscribe skill-register secret-job")
    for label in ("inline", "file", "path", "callback", "newline", "subscribe-file", "register-inline"):
        assert refused(out[label], "ArgsInvalid"), (label, out[label])
    for label in ("provider", "executor", "subscribe-internal", "register-internal"):
        assert refused(out[label]) and "internal skill" in out[label][1], (label, out[label])
    assert refused(out["hidden"]) and "hidden" in out["hidden"][1]
    assert out["named"][0] == "ALLOWED"
    assert [s.ref for s in context_manager.state.schedules.list()] == ["secret-job"]


async def test_the_ref_taking_skills_are_hidden_until_named(context_manager, skills):
    out = await probe(context_manager, [
        ("create", "schedule-create", {"ref": "my-report", "every": 60}),
        ("subscribe", "event-subscribe", {"topic": "t", "ref": "my-handler"}),
        ("register", "skill-register", {"name": "my-x", "definition": {"ref": "my-report"}}),
        ("list", "schedule-list", {}),
    ])  # no allowed-tools: every visible skill
    for label in ("create", "subscribe", "register"):
        assert refused(out[label]) and "hidden" in out[label][1], (label, out[label])
    assert out["list"] == ["ALLOWED", []]


async def test_event_subscribe_from_agent_code(context_manager, skills):
    out = await probe(context_manager, [
        ("mine", "event-subscribe", {"topic": "deploy", "ref": "my-handler", "persist": True}),
        ("other", "event-subscribe", {"topic": "deploy", "ref": "other-report"}),
    ], allowed_tools="event-subscribe(ref=my-*) my-*")
    assert out["mine"][0] == "ALLOWED" and refused(out["other"])
    (stored,) = context_manager.state.subscriptions.list()
    assert stored.ref == "my-handler" and stored.created_by.startswith("agent code of")


async def test_skill_register_from_agent_code_can_do_no_more_than_the_code(context_manager, skills, tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    hello = {
        "description": "Says hello.",
        "body": "Say hello.",
        "model": {"agent": "agent-scripted", "script": [{"text": "Hello from a registered skill."}]},
    }
    code = f"""
ATTEMPTS = {[
        ("prompt", "skill-register", {"name": "my-hello", "definition": hello}),
        ("call-prompt", "my-hello", {}),
        ("alias", "skill-register", {"name": "my-double", "definition": {"ref": "my-report", "args": {"n": 21}}}),
        ("call-alias", "my-double", {}),
        ("name", "skill-register", {"name": "other-x", "definition": hello}),
        ("shell", "skill-register", {"name": "my-shell", "definition": {"ref": "shell", "args": {"command": "id"}}}),
        ("widen", "skill-register", {"name": "my-wide", "definition": {**hello, "allowed-tools": "shell"}}),
        ("config", "skill-register", {"name": "my-cfg", "definition": {**hello, "model": {"region": "x"}}}),
    ]!r}
""" + PROBE
    call = {"prompt": "Test.", "user_message": "Go.", "config": {"agent": "agent-scripted", "script": [{"code": code}]},
            "allowed_tools": "skill-register(name=my-*) my-*"}
    out = await context_manager.invoke("agent", call, config=ALLOW)
    assert out["prompt"][0] == "ALLOWED" and out["prompt"][1]["origin"] == "registered"
    assert out["call-prompt"] == ["ALLOWED", "Hello from a registered skill."]
    assert out["alias"][0] == "ALLOWED" and out["call-alias"] == ["ALLOWED", 42]
    assert refused(out["name"]) and "skill-register(name=my-*)" in out["name"][1]
    assert refused(out["shell"]) and "may not call shell" in out["shell"][1], out["shell"]
    assert refused(out["widen"]) and "its own allowed-tools" in out["widen"][1]
    assert refused(out["config"], "ArgsInvalid")
    # the registered prompt skill may call no more than the code that registered it
    assert context_manager.get("my-hello").allowed_tools == "skill-register(name=my-*) my-*"
    assert json.dumps(out)  # plain JSON all the way back


# -- what a stored ref may ask for, and how it runs (CONTRACT section 13) ------------------------

SUB_AGENT = {"prompt": "Help.", "config": {"agent": "agent-scripted", "script": [{"code": (
    f"ATTEMPTS = {[('mine', 'my-report', {'n': 1}), ('other', 'other-report', {})]!r}\n" + PROBE
)}]}}  # fmt: skip


async def test_skill_register_cannot_widen_a_sub_agent(context_manager, skills):
    wide = {"ref": "agent", "args": {**SUB_AGENT, "allowed_tools": "*"}}
    far = {"ref": "agent", "args": {"prompt": "p", "config": {"endpoint_url": "http://127.0.0.1:9"}}}
    out = await probe(context_manager, [
        ("wide", "skill-register", {"name": "my-wide", "definition": wide}),
        ("call-wide", "my-wide", {}),
        ("far", "skill-register", {"name": "my-far", "definition": far}),
        ("prompt", "skill-register", {"name": "my-p", "definition": {"description": "d", "body": "b",
                                                                      "allowed-tools": "*"}}),
    ], allowed_tools="skill-register agent my-*")  # fmt: skip
    assert refused(out["wide"]), out["wide"]
    assert "agent-code may not call agent (at definition.args.allowed_tools): agent code may start a sub-agent only " \
        "with its own allowed-tools" in out["wide"][1]
    assert out["call-wide"][0] in ("SkillNotFound", "ToolNotAllowed")  # it was never registered
    assert refused(out["far"]) and "(at definition.args.config.endpoint_url)" in out["far"][1]
    assert refused(out["prompt"]) and "(at definition.allowed-tools)" in out["prompt"][1]
    assert not {"my-wide", "my-far", "my-p"} & set(context_manager.catalog.skills)


async def test_a_registered_alias_runs_under_its_registrant_whoever_calls_it(context_manager, skills):
    # agent A registers an alias of agent with the prompt and model fixed; agent B's code
    # calls it, once asking for every tool: the alias runs as A's code would have
    out = await probe(context_manager, [
        ("register", "skill-register", {"name": "my-helper", "definition": {"ref": "agent", "args": SUB_AGENT}}),
    ], allowed_tools="skill-register agent my-*")  # fmt: skip
    assert out["register"][0] == "ALLOWED", out
    out = await probe(context_manager, [
        ("as-is", "my-helper", {}),
        ("wide", "my-helper", {"allowed_tools": "*"}),
    ], allowed_tools="my-helper other-report")  # fmt: skip
    assert out["as-is"][0] == "ALLOWED", out
    assert out["as-is"][1]["mine"] == ["ALLOWED", 2]
    assert refused(out["as-is"][1]["other"])  # B may call it, A could not: its sub-agent cannot either
    assert refused(out["wide"]) and "only with its own allowed-tools" in out["wide"][1], out["wide"]


async def test_ref_taking_skills_called_by_deferred_work_keep_its_makers_authority(context_manager, skills):
    # an alias of schedule-create, made by agent code: whoever calls it, a schedule it
    # makes is agent code's, held to what that code could call
    out = await probe(context_manager, [
        ("register", "skill-register", {"name": "my-scheduler", "definition": {"ref": "schedule-create",
                                                                                "args": {"every": 60}}}),
    ], allowed_tools="skill-register schedule-create agent my-*")  # fmt: skip
    assert out["register"][0] == "ALLOWED", out
    made = await context_manager.invoke("my-scheduler", {"ref": "my-report", "args": {"n": 3}}, config=ALLOW)
    assert made["authority"]["untrusted"] is True and made["created_by"].startswith("agent code of")
    with pytest.raises(ToolNotAllowed, match=r"\(at args.allowed_tools\)"):
        await context_manager.invoke(
            "my-scheduler", {"ref": "agent", "args": {"prompt": "p", "allowed_tools": "*"}}, config=ALLOW
        )


async def test_a_ref_inside_a_ref_is_checked_when_it_is_stored(context_manager, skills):
    # agent code schedules schedule-create (or registers an alias of it) to make, later,
    # a wider agent than it could start: refused now, naming the nested arg
    wide = {"ref": "agent", "args": {"prompt": "p", "allowed_tools": "*"}, "every": 60}
    out = await probe(context_manager, [
        ("schedule", "schedule-create", {"ref": "schedule-create", "args": wide, "every": 60}),
        ("alias", "skill-register", {"name": "my-later", "definition": {"ref": "schedule-create", "args": wide}}),
        ("register", "schedule-create", {"ref": "skill-register", "every": 60, "args": {
            "name": "my-wide", "definition": {"ref": "agent", "args": {"allowed_tools": "*"}}}}),
        ("fine", "schedule-create", {"ref": "schedule-create", "every": 60,
                                     "args": {"ref": "my-report", "args": {"n": 1}, "every": 60}}),
    ], allowed_tools="schedule-create skill-register agent my-*")  # fmt: skip
    assert refused(out["schedule"]) and "(at args.args.allowed_tools)" in out["schedule"][1], out["schedule"]
    assert refused(out["alias"]) and "(at definition.args.args.allowed_tools)" in out["alias"][1], out["alias"]
    assert refused(out["register"]) and "(at args.definition.args.allowed_tools)" in out["register"][1]
    assert out["fine"][0] == "ALLOWED", out["fine"]
    assert [s.ref for s in context_manager.state.schedules.list()] == ["schedule-create"]
