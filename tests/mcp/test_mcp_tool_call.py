"""One MCP tool call while it runs (tool_call.py): its agent events as progress, a
client's cancellation, approvals elicited from the client; with the real ``mcp``
Client connected in-process (both protocol eras)."""

from __future__ import annotations

import anyio
import mcp_types as types
import pytest
from mcp import Client

from agent_apps.mcp.server import SkillServer
from agent_apps.mcp.tool_call import event_message

pytestmark = pytest.mark.anyio

MODES = ["auto", "legacy"]  # 2026-07-28 (direct dispatch) and the initialize handshake


@pytest.mark.parametrize("mode", MODES)
async def test_agent_events_arrive_as_progress(server, mode):
    messages = []

    async def progress(value, total, message):
        messages.append(message)

    async with Client(server.server, mode=mode) as client:
        result = await client.call_tool("counter", {"text": "x"}, progress_callback=progress)
    assert not result.is_error, result.content
    assert result.structured_content == {"count": 4}
    assert messages[0].startswith("counter: started (agent-scripted")
    assert "counter says: Let me count." in messages
    assert any(m.startswith("counter runs code: n = await ctx.manager.invoke") for m in messages)
    assert any(m.startswith("counter: code result: n = 4") for m in messages)
    assert messages[-1] == "counter: complete after 1 turn(s), 1 code run(s)"


@pytest.mark.parametrize("mode", MODES)
async def test_client_cancellation_cancels_the_agent_run(context_manager, skills, write_skill, tmp_path, mode):
    marker = tmp_path / "cancelled"
    write_skill(
        "waiter.skill.md",
        f"""
        ---
        description: An agent whose code waits in a slow tool.
        metadata:
          model:
            agent: agent-scripted
            script:
              - code: |
                  await ctx.manager.invoke("slow-tool", {{"marker": {str(marker)!r}}})
        ---
        Wait.
        """,
    )
    server = SkillServer(context_manager)
    running = anyio.Event()

    async def progress(value, total, message):
        if "runs code" in message:
            running.set()

    async with Client(server.server, mode=mode) as client:
        async with anyio.create_task_group() as tg:

            async def call():
                await client.call_tool("waiter", {}, progress_callback=progress)

            tg.start_soon(call)
            await running.wait()
            for _ in range(50):  # let the code reach the slow tool
                await anyio.sleep(0.02)
            tg.cancel_scope.cancel()
        for _ in range(500):
            if marker.exists():
                break
            await anyio.sleep(0.01)
        assert marker.exists(), "the slow tool's signal was not cancelled"
        assert "cancel" in marker.read_text()
        # the server still works after a cancelled call
        assert (await client.call_tool("hello", {})).content[0].text == "hello"


def test_event_messages_are_readable():
    assert event_message({"type": "turn-start", "agent": "a", "turn": 2}) == "a: turn 2"
    assert event_message({"type": "tool-error", "agent": "a", "result": "boom"}) == "a: code error: boom"
    error = {"type": "agent-error", "agent": "a", "error": {"type": "X", "message": "bad"}}
    assert event_message(error) == "a error: bad"
    assert event_message({"type": "model-call", "agent": "a", "turn": 1}) == "a: asks the model (turn 1)"
    answered = {"type": "model-response", "agent": "a", "turn": 1, "latency_ms": 12.5, "response": {"text": "x"}}
    assert event_message(answered) == "a: the model answered (turn 1, 12.5 ms)"
    asked = {"type": "approval-requested", "agent": "a", "skill": "shell", "args": {"command": "rm x"}}
    assert event_message(asked) == "a: waits for approval of shell"
    resolved = {"type": "approval-resolved", "agent": "a", "skill": "shell", "decision": "deny", "by": "approver"}
    assert event_message(resolved) == "a: shell: deny (approver)"


APPROVE = """
frontmatter = {"description": "Asks for approval like the security policy does.",
               "params": {"type": "object", "properties": {"what": {"type": "string"}}}}
async def main(ctx, args):
    from agent_apps.tools import approval
    approver = approval.find_approver(ctx.manager.context_manager)
    if approver is None:
        return {"approved": None}
    request = approval.ApprovalRequest(skill="shell", args={"command": args["what"]}, category="admin",
                                       mode="interactive", rule="test")
    approved, reason = await approval.ask(approver, request)
    return {"approved": approved, "reason": reason}
"""


@pytest.mark.parametrize("mode", MODES)
async def test_approvals_are_elicited_from_the_client(context_manager, skills, write_skill, mode):
    write_skill("needs-approval", APPROVE)
    server = SkillServer(context_manager)
    questions = []

    async def elicit(context, params):
        questions.append(params.message)
        if "make deploy" in params.message:
            return types.ElicitResult(action="accept", content={"approve": True})
        return types.ElicitResult(action="accept", content={"approve": False, "reason": "use staging"})

    async with Client(server.server, mode=mode, elicitation_callback=elicit) as client:
        yes = await client.call_tool("needs-approval", {"what": "make deploy"})
        no = await client.call_tool("needs-approval", {"what": "rm -rf /"})
    assert yes.structured_content == {"result": {"approved": True, "reason": None}}
    assert no.structured_content == {"result": {"approved": False, "reason": "use staging"}}
    assert questions[0].startswith('agent-apps asks: allow shell {"command": "make deploy"} (admin)')

    async with Client(server.server, mode=mode) as client:  # no elicitation capability: no approver
        none = await client.call_tool("needs-approval", {"what": "x"})
    assert none.structured_content == {"result": {"approved": None}}
