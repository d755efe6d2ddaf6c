"""Our MCP server, with the real ``mcp`` Client connected in-process (both protocol eras)."""

from __future__ import annotations

import anyio
import mcp_types as types
import pytest
from mcp import Client

from agent_apps.mcp.server import SkillServer

pytestmark = pytest.mark.anyio

MODES = ["auto", "legacy"]  # 2026-07-28 (direct dispatch) and the initialize handshake


@pytest.mark.parametrize("mode", MODES)
async def test_visible_skills_are_tools_with_schemas(server, mode):
    async with Client(server.server, mode=mode) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert {"word-count", "stats", "hello", "counter", "file-read"} <= set(tools)
    assert "secret" not in tools and "agent-scripted" not in tools and "agent-execute" not in tools
    wc = tools["word-count"]
    assert wc.description == "Count the words in a text."
    assert wc.input_schema["required"] == ["text"]
    assert wc.output_schema["properties"]["result"] == {"type": "integer"}
    assert "wrapped" in wc.output_schema["description"]
    assert tools["stats"].output_schema == {
        "type": "object",
        "properties": {"words": {"type": "integer"}},
        "required": ["words"],
    }
    assert tools["hello"].input_schema == {"type": "object", "properties": {}}
    assert tools["hello"].output_schema is None


@pytest.mark.parametrize("mode", MODES)
async def test_results_are_structured(server, mode):
    async with Client(server.server, mode=mode) as client:
        wc = await client.call_tool("word-count", {"text": "a b c"})
        stats = await client.call_tool("stats", {"text": "a b"})
        hello = await client.call_tool("hello", {})
    assert not wc.is_error and wc.structured_content == {"result": 3} and wc.content[0].text == "3"
    assert stats.structured_content == {"words": 2}
    assert hello.content[0].text == "hello" and hello.structured_content == {"result": "hello"}


@pytest.mark.parametrize("mode", MODES)
async def test_errors_are_tool_errors_and_the_server_lives_on(server, mode):
    async with Client(server.server, mode=mode) as client:
        invalid = await client.call_tool("word-count", {"text": 3})
        failed = await client.call_tool("broken", {})
        unknown = await client.call_tool("wrod-count", {})
        hidden = await client.call_tool("secret", {})
        ok = await client.call_tool("word-count", {"text": "still alive"})
    assert invalid.is_error and "invalid args at text" in invalid.content[0].text
    assert invalid.structured_content["error"]["type"] == "ArgsInvalid"
    assert failed.is_error and "the disk is on fire" in failed.content[0].text
    assert unknown.is_error and "did you mean word-count" in unknown.content[0].text
    assert hidden.is_error and "not served" in hidden.content[0].text
    assert ok.structured_content == {"result": 2}


async def test_tool_list_changes_notify_both_eras(context_manager, skills, write_skill, skills_path):
    server = SkillServer(context_manager)
    snapshot = await anyio.to_thread.run_sync(
        lambda: __import__("agent_apps.mcp.server").mcp.server.search_path_snapshot(context_manager)
    )
    legacy_notes = []

    async def on_message(message):
        if (
            isinstance(message, types.ToolListChangedNotification)
            or getattr(message, "method", "") == "notifications/tools/list_changed"
        ):
            legacy_notes.append(message)

    async with (
        Client(server.server, mode="legacy", message_handler=on_message) as legacy,
        Client(server.server) as modern,
    ):
        assert "added" not in {t.name for t in (await legacy.list_tools()).tools}
        async with modern.listen(tools_list_changed=True) as subscription:
            write_skill("added", 'frontmatter = {"description": "New."}\nasync def main(ctx, args):\n    return 1\n')
            snapshot = await server.check_for_changes(snapshot)
            with anyio.fail_after(10):
                async for _event in subscription:
                    break
            for _ in range(200):
                if legacy_notes:
                    break
                await anyio.sleep(0.01)
            assert legacy_notes, "no notifications/tools/list_changed on the handshake-era connection"
            assert "added" in {t.name for t in (await modern.list_tools()).tools}

            # editing a description changes the list; removing a file removes the tool
            path = skills_path / "added.skill.py"
            path.write_text('frontmatter = {"description": "Edited."}\nasync def main(ctx, args):\n    return 1\n')
            snapshot = await server.check_for_changes(snapshot)
            tools = {t.name: t for t in (await legacy.list_tools()).tools}
            assert tools["added"].description == "Edited."
            path.unlink()
            snapshot = await server.check_for_changes(snapshot)
            assert "added" not in {t.name for t in (await legacy.list_tools()).tools}
    assert len(legacy_notes) >= 3


async def test_watch_polls_the_search_path(context_manager, skills, write_skill):
    server = SkillServer(context_manager)
    notified = anyio.Event()

    async def on_message(message):
        if getattr(message, "method", "") == "notifications/tools/list_changed" or isinstance(
            message, types.ToolListChangedNotification
        ):
            notified.set()

    async with Client(server.server, mode="legacy", message_handler=on_message) as client:
        await client.list_tools()
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.watch, 0.05)
            await anyio.sleep(0.2)
            write_skill(
                "watched",
                'frontmatter = {"description": "Seen by the watcher."}\nasync def main(ctx, args):\n    return 1\n',
            )
            with anyio.fail_after(20):
                await notified.wait()
            tg.cancel_scope.cancel()
        assert "watched" in {t.name for t in (await client.list_tools()).tools}
