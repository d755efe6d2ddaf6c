"""schedule-create / -list / -delete, event-subscribe / -unsubscribe and skill-register,
called from Python: what they store or register, and their errors for bad input."""

from __future__ import annotations

import pytest

from agent_apps import ContextManager
from agent_apps.errors import AgentAppsError, ArgsInvalid
from agent_apps.state import AlreadyExists, NotFound
from agent_apps.tools.errors import PermissionDenied

from .conftest import ALLOW, lines

pytestmark = pytest.mark.anyio


async def call(cm, name, args):
    return await cm.invoke(name, args, config=ALLOW)


async def test_create_list_delete(context_manager, counter):
    cm = context_manager
    made = await call(cm, "schedule-create", {"ref": "counter", "args": {"log": str(counter)}, "every": 60,
                                              "name": "tick", "catch_up": "all"})
    assert made["every"] == 60 and made["catch_up"] == "all" and made["name"] == "tick" and made["runs"] == 0
    cron = await call(cm, "schedule-create", {"ref": "counter", "args": {"log": "x"}, "cron": "0 3 * * *"})
    assert cron["catch_up"] == "one" and cron["next"].endswith(("03:00:00+00:00", ":00"))
    listed = await call(cm, "schedule-list", {})
    assert [s["id"] for s in listed] == [made["id"], cron["id"]]  # the next due first
    assert await call(cm, "schedule-list", {"match": "tic*"}) == [listed[0]]
    assert (await call(cm, "schedule-delete", {"id": "tick"}))["deleted"] is True
    assert [s["id"] for s in await call(cm, "schedule-list", {})] == [cron["id"]]
    with pytest.raises(NotFound, match="no schedule 'tick'"):
        await call(cm, "schedule-delete", {"id": "tick"})
    with pytest.raises(AlreadyExists):
        for _ in range(2):
            await call(cm, "schedule-create", {"ref": "counter", "args": {"log": "x"}, "every": 5, "name": "twice"})


@pytest.mark.parametrize(
    ("args", "path", "text"),
    [
        ({"every": 0}, "every", "less than or equal to the minimum of 0"),
        ({"cron": "*/5 * * * * *"}, "cron", "has 6 fields; a cron expression has 5"),
        ({"every": 5, "ref": "countr"}, "ref", "no skill named 'countr' (did you mean counter?)"),
        ({"every": 5, "args": {}}, "args", "'log' is a required property (args of 'counter')"),
        ({"every": 5, "args": {"log": 3}}, "args.log", "3 is not of type 'string'"),
        ({"every": 5, "ref": "file:///tmp/x.skill.py"}, "ref", "does not match"),
        ({"every": 5, "ref": "inline://frontmatter = {}"}, "ref", "does not match"),
        ({"every": 5, "ref": "counter\n"}, "ref", "does not match"),  # RE2: $ is the very end
        ({"every": 5, "ref": "../skills/counter.skill.py"}, "ref", "does not match"),
        ({"every": 5, "catch_up": "some"}, "catch_up", "is not one of"),
        ({"every": 5, "name": "Bad Name"}, "name", "does not match"),
        ({"at": "yesterday"}, "at", "ISO 8601"),
    ],
)
async def test_bad_schedules_are_refused_with_the_arg_named(context_manager, counter, args, path, text):
    full = {"ref": "counter", "args": {"log": str(counter)}, **args}
    with pytest.raises(ArgsInvalid) as info:
        await call(context_manager, "schedule-create", full)
    assert info.value.path == path and text in str(info.value)
    assert context_manager.state.schedules.list() == []


async def test_they_change_what_runs_later_so_unattended_runs_may_not_by_default(context_manager, counter):
    cm = context_manager
    for name, args in (
        ("schedule-create", {"ref": "counter", "args": {"log": "x"}, "every": 5}),
        ("event-subscribe", {"topic": "t", "ref": "counter"}),
        ("skill-register", {"name": "x", "definition": {"ref": "counter"}}),
    ):
        with pytest.raises(PermissionDenied, match="not permitted in unattended mode"):
            await cm.invoke(name, args)
    assert cm.describe("schedule-list")["metadata"]["category"] == "read"
    assert cm.get("schedule-create").metadata["category"] == cm.get("event-subscribe").metadata["category"] == "admin"


HANDLER = """
import json
frontmatter = {"description": "Logs events.",
               "params": {"type": "object", "properties": {"topic": {"type": "string"}, "event": {"type": "object"}}}}
async def main(ctx, args):
    with open(%r, "a") as fh:
        fh.write(json.dumps(args) + "\\n")
"""


async def test_event_subscribe_for_the_managers_lifetime_and_unsubscribe(context_manager, write_skill, tmp_path):
    cm, log = context_manager, tmp_path / "heard.log"
    write_skill("on-deploy", HANDLER % str(log))
    sub = await call(cm, "event-subscribe", {"topic": "deploy.*", "ref": "on-deploy"})
    assert sub["id"].startswith("sub-") and sub["persist"] is False
    cm.events.emit("deploy.prod", {"v": 1})
    cm.events.emit("build", {"v": 2})
    await cm.events.drain()
    assert lines(log) == [{"topic": "deploy.prod", "event": {"v": 1}}]
    assert await call(cm, "event-unsubscribe", {"id": sub["id"]}) == {"id": sub["id"], "removed": True}
    cm.events.emit("deploy.prod", {"v": 3})
    await cm.events.drain()
    assert len(lines(log)) == 1
    with pytest.raises(NotFound, match="no subscription"):
        await call(cm, "event-unsubscribe", {"id": sub["id"]})
    assert cm.state.subscriptions.list() == []  # nothing was stored


async def test_a_persisted_subscription_is_subscribed_again_when_a_manager_opens_the_store(
    context_manager, write_skill, tmp_path, skills_path
):
    cm, log = context_manager, tmp_path / "heard.log"
    write_skill("on-deploy", HANDLER % str(log))
    sub = await call(cm, "event-subscribe", {"topic": "deploy", "ref": "on-deploy", "persist": True})
    assert sub["id"].startswith("psub-")
    later = ContextManager(search_path=[skills_path], home=tmp_path / "h", state=cm.state.path, env=False,
                           project=False, user=False, entry_points=False)
    later.events.emit("deploy", {"v": 1})  # the store is not open yet: not subscribed
    assert later.state.runs.list() == []  # opens it
    later.events.emit("deploy", {"v": 2})
    await later.events.drain()
    assert [entry["event"] for entry in lines(log)] == [{"v": 2}]
    await call(later, "event-unsubscribe", {"id": sub["id"]})
    assert cm.state.subscriptions.list() == []


async def test_event_subscribe_refuses_refs_that_cannot_take_events(context_manager, counter):
    with pytest.raises(ArgsInvalid, match="cannot take {topic, event} args"):
        await call(context_manager, "event-subscribe", {"topic": "t", "ref": "counter"})  # requires 'log'
    with pytest.raises(ArgsInvalid, match="no skill named 'nope'"):
        await call(context_manager, "event-subscribe", {"topic": "t", "ref": "nope"})


PROMPT = {
    "description": "Says hello.",
    "body": "Say hello.",
    "params": {"type": "object", "properties": {"who": {"type": "string"}}},
    "model": {"agent": "agent-scripted", "script": [{"text": "Hello!"}]},
}


async def test_skill_register_a_prompt_skill_that_is_listed_discovered_and_invoked(context_manager):
    cm = context_manager
    described = await call(cm, "skill-register", {"name": "hello", "definition": PROMPT})
    assert described["kind"] == "prompt" and described["origin"] == "registered"
    assert cm.get("hello").kind == "prompt"
    assert "hello" in [s.name for s in cm.visible_tools(None).tools]
    assert {"name": "hello", "description": "Says hello."} in await cm.invoke("skill-list", {"match": "hel*"})
    assert await cm.invoke("hello", {"who": "you"}) == "Hello!"


async def test_skill_register_a_skill_with_fixed_args(context_manager, counter):
    cm = context_manager
    described = await call(cm, "skill-register", {
        "name": "count-seven", "definition": {"ref": "counter", "args": {"n": 7}, "tags": ["demo"]}})
    assert described["params"]["properties"].keys() == {"log"} and "n" not in described["params"].get("required", [])
    assert await cm.invoke("count-seven", {"log": str(counter)}) == "ok"
    assert lines(counter)[0]["n"] == 7
    with pytest.raises(ArgsInvalid, match="count-seven: invalid args at n: is fixed by this registered skill"):
        await cm.invoke("count-seven", {"log": str(counter), "n": 8})  # a fixed arg is not a param


@pytest.mark.parametrize(
    ("name", "definition", "path", "text"),
    [
        ("counter", {"ref": "file-read"}, "name", "a skill named 'counter' exists"),
        ("file-read", PROMPT, "name", "a skill named 'file-read' exists"),
        ("agent-mine", PROMPT, "name", "kept for the agent and its providers"),
        ("agent", PROMPT, "name", "kept for the agent"),
        ("Bad_Name", PROMPT, "name", "does not match"),
        ("x", {**PROMPT, "ref": "counter"}, "definition", "not both"),
        ("x", {"description": "Nothing."}, "definition", "one of them"),
        ("x", {"ref": "file:///etc/passwd"}, "definition.ref", "does not match"),
        ("x", {"ref": "nope"}, "definition.ref", "no skill named 'nope'"),
        ("x", {"ref": "counter", "args": {"n": "seven"}}, "definition.args.n", "is not of type 'integer'"),
        ("x", {"ref": "counter", "body": "b"}, "definition", "not both"),
        ("x", {"ref": "counter", "params": {}}, "definition.params", "takes the ref's params"),
        ("x", {**PROMPT, "args": {}}, "definition.args", "go with 'ref'"),
        ("x", {**PROMPT, "description": ""}, "definition.description", "needs a description"),
        ("x", {**PROMPT, "model": {"region": "us-east-1"}}, "definition.model.region", "may set only"),
        ("x", {**PROMPT, "model": {"agent": "file-read"}}, "definition.model.agent", "not a provider skill"),
        ("x", {**PROMPT, "params": {"type": "array"}}, "definition", "must describe an object"),
        ("x", {**PROMPT, "params": {"properties": {"a": {"type": "strnig"}}}}, "definition", "strnig"),
        ("x", {**PROMPT, "code": "import os"}, "definition", "Additional properties"),
    ],
)
async def test_skill_register_refuses_with_the_arg_named(context_manager, counter, name, definition, path, text):
    with pytest.raises(ArgsInvalid) as info:
        await call(context_manager, "skill-register", {"name": name, "definition": definition})
    assert info.value.path == path and text in str(info.value)


async def test_registered_names_are_replaced_only_on_request_and_files_win_later(context_manager, write_skill):
    cm = context_manager
    await call(cm, "skill-register", {"name": "hello", "definition": PROMPT})
    with pytest.raises(ArgsInvalid, match="registered already"):
        await call(cm, "skill-register", {"name": "hello", "definition": PROMPT})
    await call(cm, "skill-register", {"name": "hello", "definition": {**PROMPT, "description": "Again."},
                                      "replace": True})
    assert cm.get("hello").description == "Again."
    assert [e.skill.description for e in cm.catalog.entries if e.skill.name == "hello"] == ["Again."]
    write_skill("hello", "frontmatter = {'description': 'A file.'}\nasync def main(ctx, args):\n    return 'file'\n")
    cm.reload()
    assert await cm.invoke("hello") == "file"
    (shadowed,) = [e for e in cm.catalog.entries if e.skill.origin == "registered"]
    assert shadowed.shadowed_by is cm.get("hello")
    with pytest.raises(ArgsInvalid, match="a skill named 'hello' exists"):
        await call(cm, "skill-register", {"name": "hello", "definition": PROMPT, "replace": True})


def test_register_from_python_never_shadows(context_manager):
    from agent_apps.skill import Skill

    with pytest.raises(AgentAppsError, match="never shadows"):
        context_manager.register(Skill(name="file-read", _main=lambda ctx, args: 1))
