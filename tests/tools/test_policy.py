"""The permission policy and approval: S6.14, interactive vs unattended defaults,
approvers, and denials the calling skill (the agent) can handle."""

from __future__ import annotations

import io

import pytest
from tools_helpers import make_manager, security

from agent_apps import ConfigError
from agent_apps.tools import ApprovalRequest, PermissionDenied, TerminalApprover, ToolsPlugin, session, set_approver
from agent_apps.tools.policy import decide

pytestmark = pytest.mark.anyio

ADMIN_TOOL = """
frontmatter = {
    "params": {"type": "object", "properties": {"target": {"type": "string"}}},
    "metadata": {"category": "admin"},
}
async def main(ctx, args):
    return "deployed " + args.get("target", "all")
"""

# A stand-in for an agent: calls a tool and turns a denial into data, as the agent's
# tool-error path does.
CALLER = """
frontmatter = {"params": {"type": "object", "properties": {"tool": {"type": "string"}, "args": {"type": "object"}}}}
async def main(ctx, args):
    from agent_apps.tools import PermissionDenied
    try:
        return {"ok": await ctx.manager.invoke(args["tool"], args.get("args", {}))}
    except PermissionDenied as exc:
        return {"denied": exc.to_json()}
"""

UNATTENDED = {"security": {"mode": "unattended"}}


@pytest.fixture
def pcm(cm, write_skill):
    write_skill("deploy", ADMIN_TOOL)
    write_skill("caller", CALLER)
    write_skill("plain", "frontmatter = {}\nasync def main(ctx, args):\n    return 'plain'\n")
    return cm


async def test_admin_is_blocked_unattended_unless_the_job_lists_it(pcm):  # S6.14
    with pytest.raises(PermissionDenied, match="not permitted in unattended mode") as info:
        await pcm.invoke("deploy", {}, config=UNATTENDED)
    assert info.value.rule == "security.policy.unattended.categories.admin"
    job = {"security": {"mode": "unattended", "policy": {"unattended": {"allow": ["deploy"]}}}}
    assert await pcm.invoke("deploy", {"target": "web"}, config=job) == "deployed web"


async def test_the_job_policy_holds_for_every_call_below_it(pcm):
    job = {"security": {"mode": "unattended", "policy": {"unattended": {"allow": ["deploy"]}}}}
    result = await pcm.invoke("caller", {"tool": "deploy"}, config=job)
    assert result == {"ok": "deployed all"}
    result = await pcm.invoke("caller", {"tool": "deploy"}, config=UNATTENDED)
    assert result["denied"]["type"] == "PermissionDenied" and "unattended" in result["denied"]["message"]


async def test_unattended_defaults_read_yes_write_no(pcm, workspace):
    (workspace / "a.txt").write_text("a")
    assert await pcm.invoke("file-read", {"path": "a.txt"}, config=UNATTENDED) == "a"
    with pytest.raises(PermissionDenied, match="file-write: permission denied: not permitted in unattended mode"):
        await pcm.invoke("file-write", {"path": "b.txt", "content": "b"}, config=UNATTENDED)
    with pytest.raises(PermissionDenied):
        await pcm.invoke("shell", {"command": "true"}, config=UNATTENDED)
    listed = {"security": {"mode": "unattended", "policy": {"unattended": {"allow": ["file-*"]}}}}
    await pcm.invoke("file-write", {"path": "b.txt", "content": "b"}, config=listed)
    assert (workspace / "b.txt").read_text() == "b"
    assert await pcm.invoke("plain", {}, config=UNATTENDED) == "plain"  # uncategorized: the caller's own code


async def test_interactive_defaults_write_yes_admin_asks(pcm, workspace):
    await pcm.invoke("file-write", {"path": "b.txt", "content": "b"}, config=security())
    with pytest.raises(PermissionDenied, match="needs human approval in interactive mode and no approver"):
        await pcm.invoke("deploy", {}, config=security())


async def test_approvers_yes_no_reason_and_failure(pcm):
    seen: list[ApprovalRequest] = []

    def make(answer):
        async def approve(request):
            seen.append(request)
            if isinstance(answer, Exception):
                raise answer
            return answer

        return approve

    with session(make(True)):
        assert await pcm.invoke("deploy", {"target": "prod"}, config=security()) == "deployed prod"
    request = seen[-1]
    assert (request.skill, dict(request.args), request.category, request.mode) == (
        "deploy",
        {"target": "prod"},
        "admin",
        "interactive",
    )
    assert request.rule == "security.policy.interactive.categories.admin"
    for answer, words in [
        (False, "refused by the approver"),
        ("use staging", "refused by the approver: use staging"),
        (None, "refused by the approver"),
        (RuntimeError("ui gone"), "the approver failed (RuntimeError: ui gone)"),
    ]:
        with (
            session(make(answer)),
            pytest.raises(PermissionDenied, match=words.replace("(", r"\(").replace(")", r"\)")),
        ):
            await pcm.invoke("deploy", {}, config=security())


async def test_request_carries_the_caller_chain(pcm):
    seen = []
    with session(lambda r: seen.append(r) or True):  # a plain (sync) callback works too
        await pcm.invoke("caller", {"tool": "deploy"}, config=security())
    assert seen[0].chain == ("caller",) and "deploy {}" in seen[0].summary()


async def test_manager_default_approver(pcm):
    set_approver(pcm, lambda request: True)
    try:
        assert await pcm.invoke("deploy", {}, config=security()) == "deployed all"
        with session(lambda request: "no"):  # the session's approver comes first
            with pytest.raises(PermissionDenied, match=": no"):
                await pcm.invoke("deploy", {}, config=security())
    finally:
        set_approver(pcm, None)


async def test_session_mode_applies_when_config_says_auto(pcm, workspace):
    with session(mode="unattended"):
        with pytest.raises(PermissionDenied, match="unattended"):
            await pcm.invoke("file-write", {"path": "x", "content": "x"})
    with session(mode="interactive"):
        await pcm.invoke("file-write", {"path": "x", "content": "x"})
        with pytest.raises(PermissionDenied, match="unattended"):  # explicit config wins
            await pcm.invoke("file-write", {"path": "x", "content": "x"}, config=UNATTENDED)


async def test_auto_mode_without_a_terminal_is_unattended(pcm, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    with pytest.raises(PermissionDenied, match="unattended"):
        await pcm.invoke("file-write", {"path": "x", "content": "x"})


def test_auto_mode_asks_whether_stdin_is_a_terminal_once_per_stdin(monkeypatch):
    from agent_apps.tools.policy import resolve_mode

    class Terminal(io.StringIO):
        asked = 0

        def isatty(self):
            Terminal.asked += 1
            return True

    class Closed(io.StringIO):
        def isatty(self):
            raise ValueError("I/O operation on closed file")

    monkeypatch.setattr("sys.stdin", Terminal(""))
    assert [resolve_mode({}) for _ in range(3)] == ["interactive"] * 3
    assert Terminal.asked == 1  # a system call per check, not per call of a skill
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # another stdin is asked again
    assert resolve_mode({}) == "unattended"
    monkeypatch.setattr("sys.stdin", Closed(""))
    assert resolve_mode({}) == "unattended"
    monkeypatch.setattr("sys.stdin", None)
    assert resolve_mode({}) == "unattended"
    assert resolve_mode({}, "interactive") == "interactive"


async def test_name_rules_beat_categories_and_deny_wins(pcm, workspace):
    (workspace / "a").write_text("a")
    config = security(policy={"deny": ["file-read"], "interactive": {"allow": ["file-read"]}})
    with pytest.raises(PermissionDenied) as info:
        await pcm.invoke("file-read", {"path": "a"}, config=config)
    assert info.value.rule == "security.policy.deny: file-read"
    with pytest.raises(PermissionDenied, match="needs human approval"):
        await pcm.invoke("plain", {}, config=security(policy={"ask": ["pla*"]}))
    with session(lambda r: True):
        assert await pcm.invoke("plain", {}, config=security(policy={"ask": ["pla*"]})) == "plain"


async def test_project_config_sets_the_policy(workspace, tmp_path, skills_path, write_skill):
    write_skill("deploy", ADMIN_TOOL)
    (workspace / "agent-apps.yaml").write_text(
        "security:\n  mode: unattended\n  policy:\n    unattended:\n      allow: [deploy]\n"
    )
    cm = make_manager(workspace, tmp_path, search_path=[skills_path], project=True)
    assert await cm.invoke("deploy") == "deployed all"
    with pytest.raises(PermissionDenied):
        await cm.invoke("file-write", {"path": "x", "content": "x"})


async def test_a_decision_is_remembered_only_for_the_config_it_came_from(workspace, tmp_path, skills_path, write_skill):
    """Decisions are memoized per skill (sandboxed agent code calls tools in loops): a
    call layer, another mode and a reloaded project config each still decide afresh."""
    write_skill("deploy", ADMIN_TOOL)
    config = workspace / "agent-apps.yaml"
    config.write_text("security:\n  mode: unattended\n  policy:\n    unattended:\n      allow: [deploy]\n")
    cm = make_manager(workspace, tmp_path, search_path=[skills_path], project=True)
    for _ in range(2):
        assert await cm.invoke("deploy") == "deployed all"
        with pytest.raises(PermissionDenied, match="security.policy.deny"):
            await cm.invoke("deploy", config=security("unattended", policy={"deny": ["deploy"]}))
    assert await cm.invoke("deploy", config=security("interactive", policy={"allow": ["deploy"]})) == "deployed all"
    config.write_text("security:\n  mode: unattended\n")
    assert await cm.invoke("deploy") == "deployed all"  # the manager reads its config once, until reload()
    cm.reload()
    with pytest.raises(PermissionDenied, match="not permitted in unattended mode"):
        await cm.invoke("deploy")


async def test_permissions_middleware_skill_when_the_plugin_is_off(workspace, tmp_path, skills_path, write_skill):
    write_skill("deploy", ADMIN_TOOL)
    cm = make_manager(workspace, tmp_path, search_path=[skills_path], plugins=[ToolsPlugin(permissions=False)])
    assert await cm.invoke("deploy", config=UNATTENDED) == "deployed all"  # no policy at all
    with pytest.raises(PermissionDenied, match="unattended"):
        await cm.invoke("deploy", config=UNATTENDED, middleware=["permissions"])


async def test_checked_once_even_with_both_middlewares(pcm):
    calls = []
    with session(lambda r: calls.append(r) or True):
        await pcm.invoke("deploy", config=security(), middleware=["permissions"])
    assert len(calls) == 1


async def test_denials_are_events(pcm):
    events = []
    pcm.events.subscribe("security", lambda topic, event: events.append(event))
    with pytest.raises(PermissionDenied):
        await pcm.invoke("deploy", config=UNATTENDED)
    assert events[0]["skill"] == "deploy" and events[0]["decision"] == "deny"


def test_bad_policy_values_are_config_errors():
    with pytest.raises(ConfigError, match="must be one of allow, ask, deny"):
        decide("x", "read", {"policy": {"interactive": {"categories": {"read": "yes"}}}}, "interactive")
    with pytest.raises(ConfigError, match="list of skill-name globs"):
        decide("x", "read", {"policy": {"allow": {"x": 1}}}, "interactive")
    assert (
        decide("x", "weird", {"policy": {"interactive": {"categories": {"admin": "ask"}}}}, "interactive").action
        == "ask"
    )


async def test_bad_mode_is_a_config_error(pcm):
    with pytest.raises(ConfigError, match="security.mode"):
        await pcm.invoke("plain", config={"security": {"mode": "cron"}})


async def test_terminal_approver(tmp_path):
    request = ApprovalRequest("shell", {"command": "make deploy"}, "admin", "interactive", "rule")
    for typed, expected in [("y\n", True), ("yes\n", True), ("\n", False), ("n\n", False), ("not now\n", "not now")]:
        err = io.StringIO()
        assert await TerminalApprover(io.StringIO(typed), err)(request) == expected
        assert 'allow shell {"command": "make deploy"} (admin)?' in err.getvalue()


async def test_terminal_approver_offers_skip_only_where_a_call_can_be_skipped():
    from dataclasses import replace

    from agent_apps.tools.approval import SKIP, answer

    request = ApprovalRequest("file-write", {"path": "a"}, "write", "interactive", "rule")
    skippable = replace(request, can_skip=True)
    err = io.StringIO()
    assert await TerminalApprover(io.StringIO("s\n"), err)(skippable) is SKIP
    assert "[y]es / [N]o / [s]kip" in err.getvalue()
    err = io.StringIO()
    assert await TerminalApprover(io.StringIO("s\n"), err)(request) == "s"  # a reason to refuse
    assert "[s]kip" not in err.getvalue()
    assert await answer(lambda r: SKIP, skippable) == ("skip", None)
    assert await answer(lambda r: SKIP, request) == ("deny", None)  # a call that cannot be skipped


def test_make_manager_without_tools_plugin_still_has_file_tools(workspace, tmp_path):
    cm = make_manager(workspace, tmp_path, plugins=[])
    assert {"file-read", "shell", "permissions"} <= {s.name for s in cm.skills()}


def test_every_manager_gets_one_tools_plugin_unless_it_brings_its_own(tmp_path):
    from agent_apps import ContextManager

    def tools_plugins(cm):
        _ = cm.catalog
        return [p for p in cm._pm.get_plugins() if isinstance(p, ToolsPlugin)]

    hermetic = {"cwd": tmp_path, "env": False, "project": False, "user": False, "entry_points": False}
    (default,) = tools_plugins(ContextManager([], **hermetic))
    assert default.permissions
    mine = ToolsPlugin(permissions=False)
    assert tools_plugins(ContextManager([], plugins=[mine], **hermetic)) == [mine]
