"""Skills that take refs as arguments, called from agent code in the real sandbox
(the scripted provider): allowed-tools argument constraints decide which refs agent
code may pass, and no ref it passes can be more than a bare skill name."""

from __future__ import annotations

import json

import pytest

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
    ], allowed_tools="schedule-create(ref=my-*) schedule-list")
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
    ], allowed_tools="event-subscribe(ref=my-*)")
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
