"""An Agent Client Protocol agent CLI as the model loop (imported only when it runs).

The CLI (Kiro, Gemini, Claude Code's adapter, any ACP agent) runs its own model loop:
agent-apps is its *client*. For one agent run this module

1. serves the one ``invoke`` tool on an MCP endpoint of its own (streamable HTTP on the
   loopback, a random port, a per-run bearer token; closed when the run ends);
2. spawns the CLI (``model.command``, ``model.env``, ``model.cwd``) in its own process
   group, ``initialize``\\ s it and opens a session whose ``mcpServers`` is that endpoint
   (or, when the agent does not declare ``mcpCapabilities.http``, a stdio bridge to it);
3. sends the system prompt, the session's earlier messages and the task as the first
   prompt, and maps what the CLI streams onto the hook protocol.

How protocol points map onto ACP:

=============  ===========================================================================
turn-start     before each ``session/prompt``, and when the agent speaks or calls again
               after a tool result (its own next model call: ACP does not mark them)
message        ``agent_message_chunk`` (``delta: true``)
reasoning      ``agent_thought_chunk``
tool-call      the CLI calls ``invoke`` on our MCP endpoint (``deny`` answers it with an
               error result); the id is the CLI's ``toolCallId`` when it announced the call
tool-result    after the code ran, before the CLI gets the result
turn-end       when the next turn starts, or ``session/prompt`` returns. ``stop`` cancels
               the prompt (``session/cancel``); ``continue`` after the prompt returned
               sends the next prompt in the same session (``message``, else "Continue.")
error, retry   ``session/prompt`` failed (JSON-RPC error): the policy decides; a retry
               sends the same prompt again
=============  ===========================================================================

The CLI's own tools (file edits, shell...) are not ours to run: its
``session/request_permission`` goes through the security policy under the name
``acp-KIND`` (``acp-edit``, ``acp-execute``...) with a category from the ACP tool kind.
A request is for our ``invoke`` only when its tool call id is one our MCP endpoint is
serving, with the same code: a title, a kind or an input shaped like ours prove nothing.
Token usage comes from ``session/prompt`` when the agent reports it (clamped: the
agent is a peer), on the prompt's last turn, for the whole prompt; else the same turn
carries an estimate (four characters a token, each model call re-reading the
conversation) marked ``estimated: true``.

The CLI is held to what a peer may do (docs/security.md, "Peers"): its stdout is read a
line at a time when the connection asks, with a turn of the event loop per line; a
turn's output is capped (``model.max_output_kb``); a line past 50 MB ends the run, one
the bounded JSON reader refuses is dropped (or fails the request it answers); only the
tail of its stderr is kept; and a cancelled run does not wait for it to agree.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shlex
import signal as _signal
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import acp
import mcp_types as types
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    EnvVariable,
    HttpHeader,
    HttpMcpServer,
    Implementation,
    McpServerStdio,
    RequestPermissionResponse,
)

from agent_apps import _json
from agent_apps.agent.prompt import INVOKE_TOOL
from agent_apps.budget import clamp_usage
from agent_apps.config import DEFAULTS
from agent_apps.errors import AgentAppsError, Cancelled
from agent_apps.mcp import expose_refs
from agent_apps.mcp.bridge import ALIVE_ENV, RUN_LOCK, hold_run_lock
from agent_apps.tools.errors import PermissionDenied
from agent_apps.tools.middleware import permit
from agent_apps.tools.subprocess import build_env

log = logging.getLogger("agent_apps.acp")

DEFAULT_STARTUP_TIMEOUT = 30.0
#: How long a cancelled prompt may take to end before the process is killed.
CANCEL_GRACE = 5.0
#: How long the run's processes get to end at each step, and the signal that starts it:
#: after their input closed, after SIGTERM, after SIGKILL (the CLI's group; each stdio bridge).
STOP_STEPS: tuple[tuple[int | None, float], ...] = ((None, 0.5), (_signal.SIGTERM, 2.0), (_signal.SIGKILL, 5.0))
_STOP_POLL = 0.01
#: How long an ``invoke`` call waits for the CLI's announcement of it (its ``tool_call``
#: update), so that everything the CLI said before the call is reported before it.
ANNOUNCE_WAIT = 0.5
_CONTINUE = "Continue."
#: The longest JSON-RPC message (one line) an agent may send: past it, the run ends.
_STDIO_LIMIT = 50 * 1024 * 1024
_NOISE_LINES = 5
#: What is kept of a peer's words for an error message: a noise line, its stderr's tail,
#: its error's text (a peer may send megabytes of each).
_SAID_CHARS = 500
_STDERR_TAIL = 8192
#: ACP tool kinds as permission categories (the security policy's words).
CATEGORIES = {
    "read": "read",
    "search": "read",
    "think": "read",
    "fetch": "read",
    "edit": "write",
    "delete": "write",
    "move": "write",
    "execute": "write",  # as the bundled `shell` tool
}
_DONE = object()  # the end of a prompt's updates
_WAKE = object()  # the run was cancelled: the prompt loop looks again
_UNSET: Any = object()


class AcpError(AgentAppsError):
    """The ACP agent CLI cannot be used: not installed, exited, another protocol, failed."""

    def __init__(self, skill: str, message: str, *, code: str | None = None) -> None:
        super().__init__(f"{skill}: {message}", skill=skill)
        self.reason = message
        self.code = code


def command_of(config: dict[str, Any], skill: str, default: list[str] | None) -> list[str]:
    """``model.command`` (a string is split like a shell would, without running one)."""
    command = config.get("command") or default
    if isinstance(command, str):
        command = shlex.split(command)
    if not isinstance(command, list) or not command or not all(isinstance(part, str) for part in command):
        raise AcpError(
            skill,
            "model.command must name the ACP agent CLI to run, as a string or a list "
            "(for example 'kiro-cli acp' or ['gemini', '--acp'])",
            code="NoCommand",
        )
    return command


async def run(ctx: Any, args: dict[str, Any], *, skill: str, default_command: list[str] | None = None) -> Any:
    config = dict(args.get("config") or {})
    return await AcpRun(ctx, args, config, command_of(config, skill, default_command), skill).run()


class AcpRun:
    """One provider run: the CLI process, its ACP session and the hook protocol state."""

    def __init__(self, ctx: Any, args: dict[str, Any], config: dict[str, Any], command: list[str], skill: str) -> None:
        self.ctx = ctx
        self.skill = skill
        self.config = config
        self.command = command
        self.shown = shlex.join(command)
        self.hook_ref: str = args["hook_ref"]
        self.invoke_ref: str = args["invoke_ref"]
        self.first_prompt = _first_prompt(args)
        self.startup_timeout = float(config.get("startup_timeout") or DEFAULT_STARTUP_TIMEOUT)
        self.cwd = str(Path(config.get("cwd") or ctx.manager.context_manager.cwd).expanduser().resolve())
        self.process: asyncio.subprocess.Process | None = None
        self.bridges = ""  # the folder where stdio bridges hold their locks while they live
        self.stderr = b""  # the last _STDERR_TAIL bytes it wrote there
        self._stderr_read: asyncio.Future[None] | None = None
        self.noise: list[str] = []
        #: Why its output could not be read (a line past _STDIO_LIMIT, a message too deep).
        self.unreadable: str | None = None
        self.max_output = int(config.get("max_output_kb") or DEFAULTS["model"]["max_output_kb"]) * 1024
        self.turn_output = 0
        self.conn: Any = None
        self.session_id: str | None = None
        self.lock = asyncio.Lock()
        self.updates: asyncio.Queue[Any] = asyncio.Queue()
        self.loop = asyncio.get_running_loop()
        # the protocol state
        self.turn = 0
        self.turn_text = ""
        self.results_seen = False  # a tool result in this turn: the agent's next output is a new turn
        self.conversation_chars = 0  # estimates: what each model call re-reads
        self.segment_in = 0
        self.segment_out = 0
        self.round_estimates = {"input_tokens": 0, "output_tokens": 0}
        self.announced: list[tuple[str, str]] = []  # (code, toolCallId) announced, not yet called
        self.serving: dict[str, str] = {}  # toolCallId -> code: invoke calls our MCP endpoint is serving
        self.announcing: bool | None = None  # does this CLI announce its invoke calls?
        self.announcement = asyncio.Event()
        self.calls = 0
        self.stopped: Any = _UNSET
        self.fatal: BaseException | None = None
        self.cancel_sent: float | None = None

    # -- the run -------------------------------------------------------------------------------

    async def run(self) -> Any:
        ctx = self.ctx
        stop_listening = ctx.signal.add_callback(self._on_cancel)
        ref = ctx.manager.callback(
            self._invoke_tool,
            name="invoke",
            params=INVOKE_TOOL["input_schema"],
            description=INVOKE_TOOL["description"],
        )
        try:
            async with contextlib.AsyncExitStack() as stack:
                endpoint = await stack.enter_async_context(
                    expose_refs(ctx, {"invoke": ref}, render=_tool_result, elicit=False)
                )
                self.bridges = stack.enter_context(tempfile.TemporaryDirectory(prefix="agent-apps-acp-"))
                stack.push_async_callback(self._bridges_gone, hold_run_lock(self.bridges))  # once the CLI is gone
                reader = await stack.enter_async_context(self._spawn())
                assert self.process is not None and self.process.stdin is not None
                self.conn = acp.connect_to_agent(_Client(self), self.process.stdin, reader)
                stack.push_async_callback(self._close_connection)
                init = await self._startup(
                    self.conn.initialize(
                        protocol_version=acp.PROTOCOL_VERSION,
                        client_capabilities=ClientCapabilities(),
                        client_info=Implementation(name="agent-apps", version=_version()),
                    ),
                    "initialize",
                )
                if init.protocol_version != acp.PROTOCOL_VERSION:
                    raise AcpError(
                        self.skill,
                        f"the ACP agent `{self.shown}` speaks ACP protocol version {init.protocol_version}; "
                        f"agent-apps speaks version {acp.PROTOCOL_VERSION}: use a version of the agent that "
                        f"supports protocol {acp.PROTOCOL_VERSION}",
                        code="ProtocolVersion",
                    )
                server = self._mcp_server(init, endpoint)
                session = await self._startup(self.conn.new_session(cwd=self.cwd, mcp_servers=[server]), "session/new")
                self.session_id = session.session_id
                return await self._loop()
        finally:
            stop_listening()
            ctx.manager.context_manager.release(ref)

    async def _loop(self) -> Any:
        ctx = self.ctx
        blocks = self.first_prompt
        self.conversation_chars = sum(len(text) for text in blocks)
        attempt = 0
        while True:
            ctx.signal.raise_if_cancelled()
            if attempt == 0:
                async with self.lock:
                    await self._turn_start()
            response, error = await self._prompt(blocks)
            self._raise_recorded()
            if self.stopped is not _UNSET:
                return self.stopped
            if ctx.signal.cancelled or (response is not None and response.stop_reason == "cancelled"):
                raise Cancelled(ctx.signal.reason or "cancelled")
            if error is not None:
                attempt += 1
                if not await self._retry(error, attempt):
                    raise AcpError(self.skill, f"the ACP agent `{self.shown}` failed: {error}", code="AgentError")
                continue
            attempt = 0
            async with self.lock:
                directive = await self._turn_end(_reported_usage(response), getattr(response, "stop_reason", None))
            if directive.get("stop"):
                return directive.get("result", self.turn_text)
            if not directive.get("continue"):
                return self.turn_text
            message = str(directive.get("message") or _CONTINUE)
            blocks = [message]
            self.conversation_chars += len(message)

    async def _prompt(self, texts: list[str]) -> tuple[Any, str | None]:
        """Send one prompt and report what the agent streams until it returns; returns
        ``(response, None)`` or ``(None, error message)``."""
        prompt = [acp.text_block(text) for text in texts]
        task = _task(self.conn.prompt(session_id=self.session_id, prompt=prompt))
        task.add_done_callback(lambda _: self.updates.put_nowait(_DONE))
        try:
            return await self._report_updates(task)
        finally:
            task.cancel()  # this run left early (cancelled): the prompt ends with it

    async def _report_updates(self, task: asyncio.Task[Any]) -> tuple[Any, str | None]:
        while True:
            timeout = None
            if self.cancel_sent is not None:
                # a stop directive lets the agent end its prompt; a cancelled run does not wait
                grace = 0.0 if self.ctx.signal.cancelled else CANCEL_GRACE
                timeout = max(0.0, self.cancel_sent + grace - time.monotonic())
            try:
                item = await asyncio.wait_for(self.updates.get(), timeout)
            except TimeoutError:  # the agent ignores session/cancel: the process is killed on the way out
                return None, None
            if item is _WAKE:
                continue
            if item is _DONE:
                break
            await asyncio.sleep(0)  # a turn of the loop per update: a flood cannot starve timers
            if self._over():
                continue
            try:
                async with self.lock:
                    await self._on_update(item)
            except BaseException as exc:  # a hook raised (a limit, a cancellation): end the run with it
                self._fail(exc)
        if task.cancelled():
            return None, None
        exc = task.exception()
        if exc is None:
            return task.result(), None
        if isinstance(exc, acp.RequestError):
            return None, _said(f"{exc} {json.dumps(exc.data) if exc.data else ''}")
        if isinstance(exc, ConnectionError) and not self._over():
            raise await self._exited("during the run")
        return None, _said(f"{type(exc).__name__}: {exc}")

    async def _retry(self, error: str, attempt: int) -> bool:
        failure = {"type": "AgentError", "message": error, "retryable": False}
        directive = await self.hook({"type": "error", "error": failure, "attempt": attempt})
        if not directive.get("retry"):
            return False
        delay = max(0.0, float(directive.get("delay") or 0))
        await self.hook({"type": "retry", "attempt": attempt, "delay": delay, "error": failure})
        if delay:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.ctx.signal.wait(), timeout=delay)
        self.ctx.signal.raise_if_cancelled()
        return True

    # -- streamed updates ------------------------------------------------------------------------

    async def _on_update(self, update: Any) -> None:
        kind = getattr(update, "session_update", None)
        if kind in ("agent_message_chunk", "agent_thought_chunk"):
            text = getattr(update.content, "text", None)
            if not text:
                return
            if not await self._output():
                return
            self._count_output(len(text))
            self.segment_out += len(text)
            self.conversation_chars += len(text)
            if kind == "agent_message_chunk":
                self.turn_text += text
                await self.hook({"type": "message", "text": text, "delta": True})
            else:
                await self.hook({"type": "reasoning", "text": text, "delta": True})
        elif kind == "tool_call":
            code = _invoke_code(update)
            if code is None:
                log.info("%s: the agent runs its own tool %r (%s)", self.skill, update.title, update.kind)
                await self._output()
                return
            self.announcing = True
            if await self._output():
                self.announced.append((code, update.tool_call_id))
                self.announcement.set()
        elif kind == "tool_call_update" and update.status in ("completed", "failed"):
            if not any(call_id == update.tool_call_id for _, call_id in self.announced):
                self.results_seen = True  # one of the agent's own tools finished

    async def _output(self) -> bool:
        """The agent produced something: after a tool result that starts its next turn.
        False when the run is over (nothing more is reported)."""
        if self._over():
            return False
        if self.results_seen:
            directive = await self._turn_end(None, "tool_use")
            if directive.get("stop"):
                self._stop(directive.get("result", self.turn_text))
                return False
            await self._turn_start()
        return True

    def _count_output(self, size: int) -> None:
        """Count what the agent said in this turn: past ``model.max_output_kb`` the run ends."""
        self.turn_output += size
        if self.turn_output > self.max_output:
            raise AcpError(
                self.skill,
                f"the ACP agent `{self.shown}` said more than model.max_output_kb ({self.max_output // 1024} KB) "
                f"in turn {self.turn}: raise model.max_output_kb if its answers are that long",
                code="OutputTooLarge",
            )

    async def _turn_start(self) -> None:
        self.turn += 1
        self.turn_output = 0
        self.turn_text = ""
        self.results_seen = False
        self.segment_in, self.segment_out = self.conversation_chars, 0
        await self.hook({"type": "turn-start", "turn": self.turn})

    async def _turn_end(self, reported: dict[str, int] | None, stop_reason: str | None) -> dict[str, Any]:
        """End a turn. ACP reports usage once a prompt, for all of its model calls: a turn
        that ends in tool calls carries none, and the prompt's last turn carries the
        whole prompt's, as the agent reported it, else estimated (so an estimate already
        counted never outweighs a smaller report)."""
        for key, chars in (("input_tokens", self.segment_in), ("output_tokens", self.segment_out)):
            self.round_estimates[key] += -(-chars // 4)
        usage: dict[str, Any] | None = None
        if reported is not None:
            usage = reported
        elif stop_reason != "tool_use":
            usage = {**self.round_estimates, "estimated": True}
        if stop_reason != "tool_use":
            self.round_estimates = {"input_tokens": 0, "output_tokens": 0}
        event: dict[str, Any] = {"type": "turn-end", "turn": self.turn, "result": self.turn_text}
        if usage is not None:
            event["usage"] = usage
        if stop_reason:
            event["stop_reason"] = stop_reason
        return await self.hook(event)

    # -- the invoke tool (called by the CLI over MCP) ----------------------------------------------

    async def _invoke_tool(self, cctx: Any, args: dict[str, Any]) -> dict[str, Any]:
        code = args.get("code")
        if not isinstance(code, str):
            return {"text": "invoke takes one argument, 'code': a string of Python source.", "error": True}
        await self._await_announcement(code)
        async with self.lock:
            if self._over():
                return {"text": "The run has ended; no more code runs.", "error": True}
            call_id = self._announced_id(code)
            if call_id is None:
                await self._output()
                self.calls += 1
                call_id = f"acp-call-{self.calls}"
            call = {"type": "tool-call", "tool": INVOKE_TOOL["name"], "args": {"code": code}, "id": call_id}
            try:
                self._count_output(len(code))
            except AcpError as exc:
                self._fail(exc)
                return {"text": "The run has ended; no more code runs.", "error": True}
            directive = await self._guarded_hook(call)
            self.segment_out += len(code)
            if directive is None or directive.get("deny"):
                reason = directive.get("deny") if directive else "the run has ended"
                result: dict[str, Any] = {"text": f"Tool call denied: {reason}", "error": True}
                await self._guarded_hook({**call, "type": "tool-result", "result": result})
                self._result_given()
                return result
        self.serving[call_id] = code
        try:
            result = await cctx.manager.invoke(self.invoke_ref, {"code": code})
        except BaseException as exc:
            self._fail(exc)
            return {"text": f"{type(exc).__name__}: {exc}", "error": True}
        finally:
            self.serving.pop(call_id, None)
        async with self.lock:
            self.conversation_chars += len(code) + len(str(result.get("text", "")))
            self._result_given()
            await self._guarded_hook({**call, "type": "tool-result", "result": result})
        return result

    def _result_given(self) -> None:
        """The CLI has our result: what it says next is its next turn. A CLI that announces
        its calls also reports their end in its stream (``tool_call_update``), in order
        with the rest, where :meth:`_on_update` sees it; so only for one that does not is
        the answer we gave it the mark. (Read from here, the mark raced the stream: a call
        announced with this one but read after its result opened a turn of its own.)"""
        if not self.announcing:
            self.results_seen = True

    async def _await_announcement(self, code: str) -> None:
        if self.announcing is False:
            return
        deadline = time.monotonic() + (ANNOUNCE_WAIT * 4 if self.announcing else ANNOUNCE_WAIT)
        while not any(announced == code for announced, _ in self.announced):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if self.announcing is None:
                    self.announcing = False  # this CLI does not announce: never wait again
                return
            self.announcement.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.announcement.wait(), remaining)

    def _announced_id(self, code: str) -> str | None:
        for index, (announced, call_id) in enumerate(self.announced):
            if announced == code:
                del self.announced[index]
                return call_id
        return None

    # -- permissions ------------------------------------------------------------------------------

    async def request_permission(self, tool_call: Any, options: list[Any]) -> RequestPermissionResponse:
        """The CLI asks before running a tool: a call our MCP endpoint is serving is
        allowed (the sandbox and the pipeline decide what its code may do); anything else,
        whatever its title, is the CLI's own and goes through the security policy."""
        allowed, reason = True, None
        code = _invoke_code(tool_call)
        ours = code is not None and self.serving.get(getattr(tool_call, "tool_call_id", None) or "") == code
        if not ours:
            kind = tool_call.kind or "other"
            args = {"title": tool_call.title or kind, "input": _jsonable(tool_call.raw_input)}
            try:
                await permit(self.ctx, f"acp-{kind}", CATEGORIES.get(kind, "admin"), args, chain=tuple(self.ctx.chain))
            except PermissionDenied as exc:
                allowed, reason = False, str(exc)
        wanted = ("allow_once", "allow_always") if allowed else ("reject_once", "reject_always")
        option = next((o for kind in wanted for o in options if o.kind == kind), None)
        if reason:
            log.info("%s: refused the agent's %r: %s", self.skill, tool_call.title, reason)
        if option is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=option.option_id))

    # -- the hook --------------------------------------------------------------------------------

    async def hook(self, event: dict[str, Any]) -> dict[str, Any]:
        directive = await self.ctx.manager.invoke(self.hook_ref, event)
        return directive if isinstance(directive, dict) else {}

    async def _guarded_hook(self, event: dict[str, Any]) -> dict[str, Any] | None:
        """The hook from the MCP side: an error of ours ends the run (the CLI gets a
        tool error); None when it did."""
        try:
            return await self.hook(event)
        except BaseException as exc:
            self._fail(exc)
            return None

    def _over(self) -> bool:
        return self.fatal is not None or self.stopped is not _UNSET or self.cancel_sent is not None

    def _stop(self, result: Any) -> None:
        self.stopped = result
        self._send_cancel()

    def _fail(self, exc: BaseException) -> None:
        if self.fatal is None:
            self.fatal = exc
        self._send_cancel()

    def _raise_recorded(self) -> None:
        if self.fatal is not None:
            raise self.fatal

    # -- cancellation ----------------------------------------------------------------------------

    def _on_cancel(self, reason: str) -> None:  # any thread
        self.loop.call_soon_threadsafe(self._send_cancel)

    def _send_cancel(self) -> None:
        """``session/cancel``: the agent ends its prompt with ``cancelled``; the process is
        killed when the run ends, whatever it does."""
        if self.cancel_sent is not None:
            return
        self.cancel_sent = time.monotonic()
        self.updates.put_nowait(_WAKE)  # the prompt loop sets its timeout again
        if self.conn is not None and self.session_id is not None:
            _task(self.conn.cancel(session_id=self.session_id))

    async def _close_connection(self) -> None:
        if self.session_id is not None and self.cancel_sent is None and self.stopped is _UNSET:
            self._send_cancel()  # the run ends abnormally (an error, task cancellation)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.conn.close(), 2)

    # -- the process -----------------------------------------------------------------------------

    def _env(self) -> dict[str, str]:
        declared = self.config.get("env")
        if declared is not None and not isinstance(declared, (dict, list)):
            raise AcpError(self.skill, "model.env must map variable names to values, or list host variable names")
        return build_env(declared)

    @contextlib.asynccontextmanager
    async def _spawn(self) -> AsyncIterator[_AgentLines]:
        if not os.path.isdir(self.cwd):
            raise AcpError(self.skill, f"model.cwd {self.cwd!r} is not a directory", code="BadCwd")
        try:
            self.process = await asyncio.create_subprocess_exec(
                *self.command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,  # its tail is kept, not all it writes (no file to fill)
                env=self._env(),
                cwd=self.cwd,
                start_new_session=True,  # its own process group: nothing it starts outlives the run
                limit=_STDIO_LIMIT,
            )
        except FileNotFoundError:
            raise AcpError(
                self.skill,
                f"the ACP agent command {self.command[0]!r} is not installed (not found on PATH): install it, "
                "or set model.command",
                code="NotInstalled",
            ) from None
        except PermissionError:
            raise AcpError(self.skill, f"the ACP agent command {self.command[0]!r} is not executable") from None
        self._stderr_read = asyncio.ensure_future(self._read_stderr())
        try:
            yield _AgentLines(self)
        finally:
            # Its stdout is read to its end (what is left is dropped) while it stops: its
            # pipes then close as it exits (the exit is seen only then), and no transport
            # is left paused past its buffer's limit, to be closed after the event loop
            # ("Event loop is closed").
            assert self.process is not None and self.process.stdout is not None
            drain = asyncio.ensure_future(_drain(self.process.stdout))
            await self._stop_process()
            for task in (drain, self._stderr_read):
                with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                    await asyncio.wait_for(task, 2)

    async def _read_stderr(self) -> None:
        """Keep the last _STDERR_TAIL bytes the CLI writes to stderr (for error messages)."""
        assert self.process is not None and self.process.stderr is not None
        with contextlib.suppress(OSError):
            while chunk := await self.process.stderr.read(1 << 16):
                self.stderr = (self.stderr + chunk)[-_STDERR_TAIL:]

    async def _stop_process(self) -> None:
        """Close its stdin (ACP agents exit on EOF), then terminate and kill its group;
        return once the last process of the group is gone (the CLI, and whatever it started
        and left in its group). A cancelled run (a deadline, Ctrl-C) gives it a fifth of
        the time to go."""
        process = self.process
        if process is None:
            return
        if process.stdin is not None:
            with contextlib.suppress(Exception):
                process.stdin.close()
        await _end(
            lambda sig: os.killpg(process.pid, sig),
            lambda: process.returncode is not None and not _group_alive(process.pid),
            hurry=self.ctx.signal.cancelled,
        )

    async def _bridges_gone(self, run_lock: int) -> None:
        """Free the run's lock, then return once every stdio bridge to our MCP endpoint is
        gone; end one that stays.

        The CLI starts a bridge (``python -m agent_apps.mcp.bridge``) as a stdio MCP
        server, and may put it in a session of its own, where the group's signals do not
        reach (the MCP SDK's stdio client does): each bridge holds a lock of its own in
        :attr:`bridges` while it lives (see :mod:`agent_apps.mcp.bridge`).
        """
        os.close(run_lock)  # a bridge that starts from now on ends at once
        for name in sorted(os.listdir(self.bridges)):
            if name != RUN_LOCK:
                await _bridge_gone(os.path.join(self.bridges, name))

    async def _startup(self, request: Any, step: str) -> Any:
        """One startup request, bounded, with the process's exit as a clear error."""
        assert self.process is not None
        task = _task(request)
        exited = asyncio.ensure_future(self.process.wait())
        cancelled = asyncio.ensure_future(self.ctx.signal.wait())
        try:
            done, _ = await asyncio.wait(
                {task, exited, cancelled}, timeout=self.startup_timeout, return_when="FIRST_COMPLETED"
            )
        finally:
            exited.cancel()
            cancelled.cancel()
        if cancelled in done:
            task.cancel()
            raise Cancelled(self.ctx.signal.reason or "cancelled")
        if task in done and task.exception() is None:
            return task.result()
        if task in done and isinstance(task.exception(), acp.RequestError):
            raise AcpError(self.skill, f"the ACP agent `{self.shown}` refused {step}: {task.exception()}")
        task.cancel()
        if exited in done or task in done:
            raise await self._exited(f"before answering {step}")
        if self.noise:
            raise AcpError(
                self.skill,
                f"`{self.shown}` does not speak the Agent Client Protocol: it printed {self.noise[0]!r} instead of "
                "JSON-RPC; set model.command to the agent's ACP mode (for example 'kiro-cli acp', 'gemini --acp')",
                code="NotAcp",
            )
        raise AcpError(
            self.skill,
            f"the ACP agent `{self.shown}` did not answer {step} within {self.startup_timeout:g} s "
            "(model.startup_timeout); is model.command the agent's ACP mode?",
            code="StartupTimeout",
        )

    async def _exited(self, when: str) -> AcpError:
        assert self.process is not None
        if self.unreadable is not None:
            return AcpError(self.skill, f"the ACP agent `{self.shown}` {self.unreadable} {when}", code="Unreadable")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.process.wait(), 2)
        if self._stderr_read is not None:  # what it said last, to the end
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(self._stderr_read), 1)
        status = self.process.returncode
        said = self._stderr_tail() or (self.noise[-1] if self.noise else "")
        how = f"exited with status {status}" if status is not None else "closed its output"
        return AcpError(
            self.skill, f"the ACP agent `{self.shown}` {how} {when}" + (f": {said}" if said else ""), code="Exited"
        )

    def _stderr_tail(self) -> str:
        lines = [line for line in self.stderr.decode("utf-8", "replace").splitlines() if line.strip()]
        return " / ".join(_said(line)[: _SAID_CHARS // 3] for line in lines[-3:])

    def _mcp_server(self, init: Any, endpoint: Any) -> Any:
        """Our endpoint as the session's MCP server: over HTTP when the agent can, else
        through a stdio bridge it starts (``python -m agent_apps.mcp.bridge``)."""
        capabilities = getattr(init.agent_capabilities, "mcp_capabilities", None)
        transport = self.config.get("mcp_transport") or "auto"
        if transport not in ("auto", "http", "stdio"):
            raise AcpError(self.skill, f"model.mcp_transport must be auto, http or stdio, not {transport!r}")
        if transport == "http" or (transport == "auto" and getattr(capabilities, "http", False)):
            headers = [HttpHeader(name=name, value=value) for name, value in endpoint.headers.items()]
            return HttpMcpServer(type="http", name="agent-apps", url=endpoint.url, headers=headers)
        variables = {**endpoint.to_env(), ALIVE_ENV: self.bridges}
        env = [EnvVariable(name=name, value=value) for name, value in variables.items()]
        return McpServerStdio(name="agent-apps", command=sys.executable, args=["-m", "agent_apps.mcp.bridge"], env=env)


class _AgentLines(asyncio.StreamReader):
    """The CLI's stdout as the ACP connection reads it (``readuntil``, all it calls), a
    line when it asks for one: a flood waits in the pipe, not in memory. JSON-RPC lines only:
    anything else is kept (a few lines, cut short) to say what the program printed
    instead. A line past the size limit ends the connection; one the bounded JSON reader
    refuses is dropped, and when it answers a request, that request fails at once with
    the reason (:func:`_readable`)."""

    def __init__(self, run: AcpRun) -> None:
        super().__init__(limit=_STDIO_LIMIT)
        self.run = run

    async def readuntil(self, separator: bytes = b"\n") -> bytes:
        run = self.run
        assert run.process is not None and run.process.stdout is not None
        while True:
            try:
                line = await run.process.stdout.readline()
            except ValueError:  # a line past the limit (the rest is drained when the run ends)
                run.unreadable = f"sent a message longer than {_STDIO_LIMIT >> 20} MB (one JSON-RPC line at most)"
                line = b""
            except OSError:  # a closed pipe
                line = b""
            if not line:
                raise asyncio.IncompleteReadError(b"", None)
            await asyncio.sleep(0)  # a turn of the loop per line, however fast they come
            if not line.lstrip().startswith(b"{"):
                if line.strip() and len(run.noise) < _NOISE_LINES:
                    run.noise.append(_said(line[: _SAID_CHARS * 4].decode("utf-8", "replace")))
                continue
            readable = _readable(line, run)
            if readable:
                return readable


class _Client:
    """The ACP client side the CLI talks to: streamed updates and permission requests.
    No file system or terminal capabilities are declared, so the CLI uses its own."""

    def __init__(self, run: AcpRun) -> None:
        self.run = run

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.run.updates.put_nowait(update)  # in arrival order; reported by the prompt loop

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> RequestPermissionResponse:
        return await self.run.request_permission(tool_call, options)


# -- helpers ----------------------------------------------------------------------------------


def _task(request: Any) -> asyncio.Task[Any]:
    """A request to the CLI as a task whose outcome is retrieved even when nobody awaits
    it: a run that ends early leaves it to fail with the connection's close."""
    task = asyncio.ensure_future(request)
    task.add_done_callback(lambda done: done.cancelled() or done.exception())
    return task


async def _end(send: Callable[[int], None], gone: Callable[[], bool], *, hurry: bool = False) -> None:
    """Wait for ``gone()`` through :data:`STOP_STEPS`, sending each step's signal first;
    ``hurry`` (the run was cancelled): a fifth of the wait before SIGKILL."""
    for sig, wait in STOP_STEPS:
        if hurry and sig != _signal.SIGKILL:
            wait *= 0.2
        if sig is not None and not gone():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                send(sig)
        deadline = time.monotonic() + wait
        while not gone():
            if time.monotonic() >= deadline:
                break
            await asyncio.sleep(_STOP_POLL)
        else:
            return
    log.warning("a process of the ACP agent survived SIGKILL")


async def _bridge_gone(path: str) -> None:
    """Wait until the bridge that locked ``path`` is gone (the lock is free); signal it
    through :data:`STOP_STEPS` if it stays."""
    import fcntl

    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:

        def gone() -> bool:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            return True

        def send(sig: int) -> None:
            pid = os.pread(fd, 32, 0).decode(errors="replace")
            if pid.isdigit():  # written once it held the lock, which it still holds
                os.kill(int(pid), sig)

        await _end(send, gone)
    finally:
        os.close(fd)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _first_prompt(args: dict[str, Any]) -> list[str]:
    """The system prompt, the session's earlier messages (an ACP session cannot be seeded
    with history), and the task: one text block each."""
    blocks = [f"<system-instructions>\n{args['prompt']}\n</system-instructions>"]
    history = [line for line in (_history_line(m) for m in args.get("messages") or ()) if line]
    if history:
        blocks.append("<earlier-conversation>\n" + "\n".join(history) + "\n</earlier-conversation>")
    blocks.append(args.get("user_message") or "Do the task.")
    return blocks


def _history_line(message: dict[str, Any]) -> str:
    role, text = message.get("role"), str(message.get("text") or "").strip()
    if role == "assistant":
        calls = [f"[invoke]\n{(call.get('input') or {}).get('code', '')}" for call in message.get("tool_calls") or ()]
        return "\n".join(filter(None, [f"assistant: {text}" if text else "", *calls]))
    if role == "tool":
        return f"[{'error' if message.get('error') else 'result'}]\n{text}"
    if role == "summary":
        return f"[summary of earlier messages]\n{text}"
    return f"user: {text}" if text else ""


def _invoke_code(tool_call: Any) -> str | None:
    """The code of what looks like a call of our ``invoke`` tool (however the CLI titles
    MCP tools). A look, not a proof: :meth:`AcpRun.request_permission` also asks our
    endpoint."""
    raw = getattr(tool_call, "raw_input", None)
    title = str(getattr(tool_call, "title", "") or "")
    if isinstance(raw, dict) and set(raw) == {"code"} and isinstance(raw["code"], str) and "invoke" in title:
        return raw["code"]
    return None


def _reported_usage(response: Any) -> dict[str, int] | None:
    """The prompt's usage as the agent reported it, each count clamped (it is a peer)."""
    usage = getattr(response, "usage", None)
    if usage is None:
        return None
    out = {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens}
    for source, key in (("cached_read_tokens", "cache_read_tokens"), ("cached_write_tokens", "cache_write_tokens")):
        if getattr(usage, source, None):
            out[key] = getattr(usage, source)
    return clamp_usage(out)


def _tool_result(value: Any) -> types.CallToolResult:
    """The invoke callback's ``{text, error}`` as an MCP tool result."""
    text = str(value.get("text", "")) if isinstance(value, dict) else str(value)
    error = bool(value.get("error")) if isinstance(value, dict) else False
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=error)


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return str(value)
    return value


def _said(text: str) -> str:
    """A peer's words for an error message: one line, at most _SAID_CHARS characters."""
    text = " ".join(str(text)[: _SAID_CHARS * 4].split())
    return text if len(text) <= _SAID_CHARS else text[: _SAID_CHARS - 1] + "…"


def _readable(line: bytes, run: AcpRun) -> bytes:
    """``line`` as the ACP connection may read it. A line the bounded JSON reader
    refuses (not JSON, nested too deep, NaN: the connection's own parser would log a
    traceback, or crash on it) is dropped; when it answers a request, that request gets
    an error answer with the reason instead, so it fails at once."""
    text = line.decode("utf-8", "replace")
    try:
        _json.loads(text)
    except ValueError as exc:
        log.info("%s: dropped a message of the agent that cannot be read (%s)", run.skill, _said(str(exc)))
        request = _json.top_level_scalar(text, "id")
        if request is None or _json.top_level_scalar(text, "method") is not None:
            return b""
        error = {"code": -32700, "message": f"agent-apps could not read the answer: {_said(str(exc))}"}
        return json.dumps({"jsonrpc": "2.0", "id": request, "error": error}).encode() + b"\n"
    return line


async def _drain(stream: asyncio.StreamReader) -> None:
    """Read ``stream`` to its end, dropping what it says."""
    with contextlib.suppress(OSError):
        while await stream.read(1 << 16):
            pass


def _version() -> str:
    from agent_apps import __version__

    return __version__
