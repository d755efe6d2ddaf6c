"""A real ACP agent CLI for the tests: the ``acp`` package's agent side over stdio, whose
"model" plays a script and reaches agent-apps' ``invoke`` tool through the MCP server
it was given in ``session/new`` (a real MCP client, over HTTP or stdio).

    python acp_agent.py SCRIPT.json [--protocol N] [--no-http] [--exit-early] [--garbage]

The script is the conformance suite's neutral form: a list of turns, each with optional
``text``, ``reasoning``, ``code`` (a string, or a list for several calls in one turn),
``delay`` (seconds, cancellable), ``usage`` and ``error``, plus for these tests:
``echo`` (``"prompt"``, ``"cwd"`` or ``"env:NAME"``, comma-separated: say those,
joined by ``|``, instead of ``text``) and
``permission`` (``{kind, title, raw_input?}``: ask the client before going on, and say the
answer; the raw input is the permission itself unless given) and ``ask_in_flight`` (a
title: while each call of the turn is in flight, once its code has written the file
``in-flight`` in the session's folder, ask permission for that very call, and write the
answer to the file ``asked``).

One prompt plays turns until one has no code (its text ends the prompt), as an agent
CLI's own loop does: a turn with code is followed by the next turn, which sees the
results. It imports nothing from agent_apps.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

if "--exit-early" in sys.argv:  # before the slow imports, as a CLI that fails fast
    print("fatal: not logged in (run `acp_agent login`)", file=sys.stderr)
    sys.exit(3)
if "--garbage" in sys.argv:  # a program that is not an ACP agent: it prints its usage
    print("Usage: acp_agent [OPTIONS] COMMAND\nTry 'acp_agent --help' for help.", flush=True)
    time.sleep(60)
    sys.exit(2)

import acp  # noqa: E402
from acp import helpers  # noqa: E402
from acp.schema import (  # noqa: E402
    AgentCapabilities,
    HttpMcpServer,
    InitializeResponse,
    McpCapabilities,
    NewSessionResponse,
    PermissionOption,
    PromptResponse,
    Usage,
)

ARGS = sys.argv[1:]
SCRIPT: list[dict[str, Any]] = json.loads(open(ARGS[0]).read()) if ARGS and not ARGS[0].startswith("-") else []


class ScriptedAgent:
    def __init__(self) -> None:
        self.conn: Any = None
        self.position = 0
        self.cancelled = asyncio.Event()
        self.mcp: Any = None
        self.holder: asyncio.Task[None] | None = None  # the task that holds the MCP client open
        self.closing = asyncio.Event()
        self.cwd = ""
        self.calls = 0

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        version = int(ARGS[ARGS.index("--protocol") + 1]) if "--protocol" in ARGS else protocol_version
        http = "--no-http" not in ARGS
        return InitializeResponse(
            protocol_version=version,
            agent_capabilities=AgentCapabilities(mcp_capabilities=McpCapabilities(http=http)),
        )

    async def new_session(self, cwd: str, mcp_servers: list[Any] | None = None, **kwargs: Any) -> NewSessionResponse:
        self.cwd = cwd
        (server,) = mcp_servers or [None]
        opened: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.holder = asyncio.ensure_future(self.hold(server, opened))
        self.mcp = await opened
        tools = [t.name for t in (await self.mcp.list_tools()).tools]
        assert tools == ["invoke"], tools
        return NewSessionResponse(session_id="session-1")

    async def hold(self, server: Any, opened: asyncio.Future[Any]) -> None:
        """Open the MCP client and hold it until the agent ends, in a task of its own: the
        client's anyio cancel scopes must be left by the task that entered them (closed from
        another, they raise, and the process ends on a traceback instead of cleanly)."""
        from mcp import Client

        try:
            async with AsyncExitStack() as stack:
                opened.set_result(await stack.enter_async_context(Client(await self.transport(server, stack))))
                await self.closing.wait()
        except BaseException as exc:
            if opened.done():
                raise
            opened.set_exception(exc)

    @staticmethod
    async def transport(server: Any, stack: AsyncExitStack) -> Any:
        """The MCP client's transport to ``server`` (its HTTP client closes with ``stack``)."""
        if isinstance(server, HttpMcpServer):
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            headers = {h.name: h.value for h in server.headers}
            http = await stack.enter_async_context(
                httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300))
            )
            return streamable_http_client(server.url, http_client=http)
        from mcp import StdioServerParameters

        env = {e.name: e.value for e in server.env}
        return StdioServerParameters(command=server.command, args=server.args, env=env)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        self.cancelled.set()

    async def say(self, session_id: str, update: Any) -> None:
        await self.conn.session_update(session_id=session_id, update=update)

    async def sleep(self, seconds: float) -> bool:
        """Sleep; True when cancelled meanwhile."""
        try:
            await asyncio.wait_for(self.cancelled.wait(), seconds)
        except TimeoutError:
            return False
        return True

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        self.cancelled.clear()
        received = "\n".join(getattr(block, "text", "") for block in prompt)
        if self.position >= len(SCRIPT):
            raise acp.RequestError.internal_error({"details": f"the script has no turn {self.position + 1}"})
        while self.position < len(SCRIPT):
            turn = SCRIPT[self.position]
            self.position += 1
            if turn.get("delay") and await self.sleep(float(turn["delay"])):
                return PromptResponse(stop_reason="cancelled")
            if "error" in turn:
                raise acp.RequestError.internal_error({"details": str(turn["error"])})
            if turn.get("reasoning"):
                await self.say(session_id, helpers.update_agent_thought_text(turn["reasoning"]))
            text = turn.get("text") or ""
            if turn.get("echo"):
                text = "|".join(self.echo(what, received) for what in turn["echo"].split(","))
            if turn.get("permission"):
                text = await self.ask(session_id, turn["permission"])
            for i in range(0, len(text), 8):
                await self.say(session_id, helpers.update_agent_message_text(text[i : i + 8]))
            codes = turn.get("code")
            codes = [codes] if isinstance(codes, str) else list(codes or [])
            ids = []
            for code in codes:  # the model's tool calls, announced as it streams them
                self.calls += 1
                ids.append(f"call-{self.calls}")
                start = helpers.start_tool_call(
                    ids[-1], "invoke", kind="other", status="pending", raw_input={"code": code}
                )
                await self.say(session_id, start)
            for call_id, code in zip(ids, codes, strict=True):
                if self.cancelled.is_set():
                    return PromptResponse(stop_reason="cancelled")
                if turn.get("ask_in_flight"):
                    result = await self.call_and_ask(session_id, call_id, code, turn["ask_in_flight"])
                else:
                    result = await self.call(code)
                status = "failed" if result.is_error else "completed"
                output = helpers.tool_content(helpers.text_block(result.content[0].text))
                await self.say(session_id, helpers.update_tool_call(call_id, status=status, content=[output]))
            if self.cancelled.is_set():
                return PromptResponse(stop_reason="cancelled")
            if not codes:
                usage = turn.get("usage")
                if usage:
                    total = usage["input_tokens"] + usage["output_tokens"]
                    return PromptResponse(
                        stop_reason="end_turn",
                        usage=Usage(
                            input_tokens=usage["input_tokens"], output_tokens=usage["output_tokens"], total_tokens=total
                        ),
                    )
                return PromptResponse(stop_reason="end_turn")
        return PromptResponse(stop_reason="end_turn")

    def echo(self, what: str, received: str) -> str:
        if what == "prompt":
            return received
        if what == "cwd":
            return self.cwd + " " + os.getcwd()
        return os.environ.get(what.removeprefix("env:"), "<unset>")

    async def call(self, code: str) -> Any:
        task = asyncio.ensure_future(self.mcp.call_tool("invoke", {"code": code}))
        cancel = asyncio.ensure_future(self.cancelled.wait())
        await asyncio.wait([task, cancel], return_when=asyncio.FIRST_COMPLETED)
        cancel.cancel()
        if not task.done():  # the client cancelled the prompt: cancel the MCP call too
            task.cancel()
            raise asyncio.CancelledError
        return task.result()

    async def call_and_ask(self, session_id: str, call_id: str, code: str, title: str) -> Any:
        """Call invoke and, while that call is in flight, ask permission for it."""
        task = asyncio.ensure_future(self.call(code))
        flag = Path(self.cwd) / "in-flight"
        for _ in range(3000):  # the code says when it runs (30 s at most)
            if flag.exists() or task.done():
                break
            await asyncio.sleep(0.01)
        permission = {"kind": "execute", "title": title, "raw_input": {"code": code}}
        (Path(self.cwd) / "asked").write_text(await self.ask(session_id, permission, call_id=call_id))
        return await task

    async def ask(self, session_id: str, permission: dict[str, Any], *, call_id: str | None = None) -> str:
        self.calls += 1
        tool_call = helpers.update_tool_call(
            call_id or f"call-{self.calls}",
            title=permission["title"],
            kind=permission["kind"],
            raw_input=permission.get("raw_input", permission),
        )
        options = [
            PermissionOption(option_id="yes", name="Allow", kind="allow_once"),
            PermissionOption(option_id="no", name="Reject", kind="reject_once"),
        ]
        response = await self.conn.request_permission(session_id=session_id, tool_call=tool_call, options=options)
        outcome = response.outcome
        chosen = getattr(outcome, "option_id", None) or outcome.outcome
        return f"permission {permission['title']!r}: {chosen}"


async def main() -> None:
    agent = ScriptedAgent()
    try:
        await acp.run_agent(agent)
    finally:
        agent.closing.set()
        if agent.holder is not None:
            await agent.holder


if __name__ == "__main__":
    asyncio.run(main())
