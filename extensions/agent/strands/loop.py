"""The Strands loop behind the agent hook protocol (imported only when the provider runs).

How protocol points map onto Strands (strands-agents 1.x):

=============  ===========================================================================
turn-start     ``BeforeModelCallEvent`` (once per turn: a retried model call is the same turn)
message        ``data`` text deltas of ``Agent.stream_async``
reasoning      ``reasoningText`` deltas
tool-call      ``BeforeToolCallEvent``; ``deny`` sets ``cancel_tool``, so the model gets an
               error tool result that says why
tool-result    after the ``invoke`` tool ran (or was denied)
turn-end       a turn with tool calls: ``AfterToolsEvent`` (``stop`` sets ``end_turn``,
               ``continue`` with a message adds it to the tool-results message); a turn
               without: when ``stream_async`` returns (``continue`` invokes again with the
               message as the next user turn)
error, retry   ``AfterModelCallEvent`` with an exception (``retry`` sets ``event.retry``
               after the delay); Strands' own retry strategy and botocore's retries are off
context-edit   before a model call, tool results older than the last ``context_keep``
               messages were elided (``model.context_edit: true``)
=============  ===========================================================================

``turn-end`` carries the model call's ``latency_ms`` and ``stop_reason``. A session's
earlier messages (``messages``, the neutral format) become the Strands agent's initial
conversation, converted to Converse messages by :mod:`.history`.

Everything runs on the caller's event loop: ``stream_async`` is iterated here, hooks
and the tool are coroutines on the same loop. Cancellation (``ctx.signal``) sets the
invocation's ``cancel_signal`` and cuts an in-flight Bedrock stream; the HTTP APIs'
clients (Anthropic, OpenAI, Ollama, LiteLLM) read on the event loop, so their stream is
cut by cancelling the task that reads it.

Tracing: the ``agent`` skill makes one span per model call (``chat MODEL``, with the
GenAI attributes), so Strands' own ``chat`` span is left out (:func:`_one_model_span`);
its other spans (``invoke_agent``, ``execute_event_loop_cycle``, ``execute_tool``) stay.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

from strands import Agent
from strands.agent.conversation_manager import NullConversationManager
from strands.hooks import (
    AfterModelCallEvent,
    AfterToolsEvent,
    BeforeModelCallEvent,
    BeforeToolCallEvent,
    HookProvider,
    HookRegistry,
)
from strands.tools.executors import ConcurrentToolExecutor
from strands.tools.executors import SequentialToolExecutor as Sequential
from strands.types.tools import AgentTool

from agent_apps.agent.prompt import INVOKE_TOOL
from agent_apps.budget import clamp_usage
from agent_apps.errors import Cancelled

from .caching import system_content
from .calls import ReportedModel
from .history import to_converse
from .models import Built, build_model, check_attachments, classify

# Strands logs failures it re-raises; they reach the user as our errors. Without this,
# Python's last-resort handler would print them to stderr when the app set up no logging.
logging.getLogger("strands").addHandler(logging.NullHandler())

_CONTINUE = "Continue."
_UNSET: Any = object()


async def run(ctx: Any, args: dict[str, Any]) -> Any:
    _one_model_span()
    config = dict(args.get("config") or {})
    built = await asyncio.to_thread(build_model, config)
    try:
        check_attachments(built.provider, args.get("attachments") or ())
        session = Session(ctx, args, config, built)
        return await session.run()
    finally:
        await built.aclose()


def _one_model_span() -> None:
    """Once per process: Strands' span per model call is a non-recording stand-in for
    the span current then (its cycle's), so that spans made below it still join the
    trace, and each model call appears once (as the ``agent`` skill's ``chat MODEL``)."""
    from opentelemetry import trace
    from strands.telemetry.tracer import get_tracer

    tracer = get_tracer()  # one for the process
    if getattr(tracer, "_agent_apps_one_model_span", False):
        return

    def start_model_invoke_span(*args: Any, **kwargs: Any) -> Any:
        return trace.NonRecordingSpan(trace.get_current_span().get_span_context())

    tracer.start_model_invoke_span = start_model_invoke_span  # type: ignore[method-assign]
    tracer._agent_apps_one_model_span = True  # type: ignore[attr-defined]


class Session(HookProvider):
    """One provider run: the Strands agent, its hooks and the protocol state."""

    def __init__(self, ctx: Any, args: dict[str, Any], config: dict[str, Any], built: Built) -> None:
        self.ctx = ctx
        self.config = config
        self.built = built
        self.hook_ref: str = args["hook_ref"]
        self.invoke_ref: str = args["invoke_ref"]
        self.prompt: str = args["prompt"]
        self.user_message: str = args.get("user_message") or "Do the task."
        self.turn = 0
        self.in_turn = False
        self.attempt = 0
        self.turn_text = ""
        self.turn_usage: dict[str, int] | None = None
        self.turn_latency: float | None = None
        self.turn_stop: str | None = None
        self._model_started = 0.0
        # The session's earlier messages, and the user's with its attachments (Strands'
        # image and document blocks, which each model class writes in its API's shape),
        # as the initial conversation.
        history, attachments = args.get("messages"), args.get("attachments")
        self.preloaded = to_converse(history or [], self.user_message, attachments) if history or attachments else None
        self.stopped: Any = _UNSET
        #: An error of ours (a hook or the invoke callback raised): it ends the run as is.
        self.fatal: BaseException | None = None
        #: A model error the agent policy chose not to retry.
        self.failure: Exception | None = None
        self.cancel_event = threading.Event()
        #: The task reading a model stream on the event loop, while it does (streams_on_loop).
        self._reader: asyncio.Task[Any] | None = None
        self._reader_cut = False
        self._loop = asyncio.get_running_loop()
        # every model call goes through the hook (model-call, model-response)
        model = ReportedModel(
            built.model,
            self,
            with_messages=bool(args.get("model_messages")),
            buffered=bool(args.get("buffer_responses")),
        )
        self.agent = Agent(
            model=model,
            tools=[InvokeTool(self)],
            # a cache point after the stable prefix, where the model caches prompts
            system_prompt=system_content(
                self.prompt, args.get("stable_prefix"), provider=built.provider, model_id=built.model_id, config=config
            ),
            callback_handler=None,
            hooks=[self],
            retry_strategy=None,  # retries go through the hook: the agent policy decides
            # parallel_tool_calls (default on): the calls of one answer run together (their
            # results go back in call order); off: in order, each after the last
            tool_executor=ConcurrentToolExecutor() if config.get("parallel_tool_calls", True) else Sequential(),
            # the conversation is kept verbatim; only context_edit elides old tool results
            conversation_manager=NullConversationManager(),
            messages=self.preloaded,
        )

    # -- the loop ----------------------------------------------------------------------------

    async def run(self) -> Any:
        ctx = self.ctx
        stop_listening = ctx.signal.add_callback(self._on_cancel)
        try:
            message: str | None = None if self.preloaded else self.user_message
            while True:
                ctx.signal.raise_if_cancelled()
                stop_reason = await self._invoke(message)
                if self.stopped is not _UNSET:
                    return self.stopped
                if stop_reason == "cancelled" or ctx.signal.cancelled:
                    raise Cancelled(ctx.signal.reason or "cancelled")
                # The model answered without calling a tool: that ends the turn, and the
                # Strands invocation with it. The policy decides whether the run goes on.
                directive = await self._turn_end()
                if directive.get("stop"):
                    return directive.get("result", self.turn_text)
                if directive.get("continue"):
                    message = str(directive.get("message") or _CONTINUE)
                    continue
                return self.turn_text
        finally:
            stop_listening()
            # Whatever ended the run (a result, an error, Ctrl-C cancelling the task), no
            # model stream may outlive it: a stalled reader thread would hold up shutdown.
            self._on_cancel("run ended")

    async def _invoke(self, message: str | None) -> str | None:
        """One Strands invocation; returns its stop reason."""
        stop_reason = None
        if self.built.streams_on_loop:
            self._reader = asyncio.current_task()
        try:
            async for event in self.agent.stream_async(message, cancel_signal=self.cancel_event):
                if self._done():  # nothing more is reported (the model's stream stops at its next event)
                    continue
                if event.get("data"):
                    await self.hook({"type": "message", "text": event["data"], "delta": self.built.streaming})
                elif event.get("reasoningText"):
                    await self.hook({"type": "reasoning", "text": event["reasoningText"], "delta": True})
                elif "result" in event:
                    stop_reason = getattr(event["result"], "stop_reason", None)
        except asyncio.CancelledError:
            if not self._reader_cut:  # not ours: Ctrl-C or the caller cancelling the task
                raise
            asyncio.current_task().uncancel()  # type: ignore[union-attr]
            raise Cancelled(self.ctx.signal.reason or "cancelled") from None
        except Exception as exc:
            self._raise_recorded()
            if self.ctx.signal.cancelled:
                raise Cancelled(self.ctx.signal.reason or "cancelled") from None
            # a configuration problem, not a bug: one line (the original is ``.original``)
            raise classify(exc, self.built).error(exc) from None
        finally:
            self._reader = None
        self._raise_recorded()
        return stop_reason

    def _raise_recorded(self) -> None:
        if self.fatal is not None:
            raise self.fatal
        if self.failure is not None:
            raise self.failure

    # -- the hook ----------------------------------------------------------------------------

    async def hook(self, event: dict[str, Any]) -> dict[str, Any]:
        try:
            directive = await self.ctx.manager.invoke(self.hook_ref, event)
        except Exception as exc:
            self._fail(exc)
            raise
        return directive if isinstance(directive, dict) else {}

    def _fail(self, exc: BaseException) -> None:
        """Our side failed (limit, cancellation, a bug): stop Strands, keep the error."""
        if self.fatal is None:
            self.fatal = exc
        self.cancel_event.set()

    def _on_cancel(self, reason: str) -> None:  # any thread
        self.cancel_event.set()
        self.built.abort()
        if self._reader is not None:
            self._loop.call_soon_threadsafe(self._cut_reader)

    def _cut_reader(self) -> None:
        reader = self._reader
        if reader is not None and not self._reader_cut:
            self._reader_cut = True
            reader.cancel()

    def _done(self) -> bool:
        return self.fatal is not None or self.failure is not None or self.cancel_event.is_set()

    async def _turn_end(self) -> dict[str, Any]:
        self.in_turn = False
        event: dict[str, Any] = {"type": "turn-end", "turn": self.turn, "result": self.turn_text}
        if self.turn_usage is not None:
            event["usage"] = self.turn_usage
        if self.turn_latency is not None:
            event["latency_ms"] = self.turn_latency
        if self.turn_stop is not None:
            event["stop_reason"] = self.turn_stop
        return await self.hook(event)

    async def _sleep(self, seconds: float) -> None:
        """Sleep, waking at once when the run is cancelled."""
        if seconds > 0:
            try:
                await asyncio.wait_for(self.ctx.signal.wait(), timeout=seconds)
            except TimeoutError:
                return
        self.ctx.signal.raise_if_cancelled()

    # -- Strands hooks -----------------------------------------------------------------------

    def register_hooks(self, registry: HookRegistry, **kwargs: Any) -> None:
        registry.add_callback(BeforeModelCallEvent, self._before_model)
        registry.add_callback(AfterModelCallEvent, self._after_model)
        registry.add_callback(BeforeToolCallEvent, self._before_tool)
        registry.add_callback(AfterToolsEvent, self._after_tools)

    async def _before_model(self, event: BeforeModelCallEvent) -> None:
        if self._done():
            return
        if self.config.get("context_edit"):
            await self._edit_context(int(self.config.get("context_keep", 6)))
        self._model_started = time.perf_counter()
        if self.in_turn:  # a retried model call: still the same turn
            return
        self.turn += 1
        self.in_turn = True
        self.turn_text, self.turn_usage, self.turn_latency, self.turn_stop = "", None, None, None
        await self.hook({"type": "turn-start", "turn": self.turn})

    async def _edit_context(self, keep: int) -> None:
        """context_edit (docs/agent.md): elide tool results older than the last ``keep``
        messages; the first user message and every assistant message stay as they are."""
        removed = 0
        for message in self.agent.messages[1:-keep]:
            if message.get("role") != "user":
                continue
            for block in message.get("content") or []:
                result = block.get("toolResult")
                if not result:
                    continue
                content = result.get("content") or []
                if len(content) == 1 and str(content[0].get("text", "")).startswith("[elided"):
                    continue
                size = sum(len(str(part.get("text", part.get("json", "")))) for part in content)
                result["content"] = [{"text": f"[elided: {size} characters]"}]
                removed += size
        if removed:
            await self.hook(
                {"type": "context-edit", "removed": removed, "kept": keep, "reason": "older tool results elided"}
            )

    async def _after_model(self, event: AfterModelCallEvent) -> None:
        if event.exception is None:
            self.attempt = 0
            response = event.stop_response
            self.turn_latency = round((time.perf_counter() - self._model_started) * 1000, 3)
            if response is not None:
                self.turn_stop = str(response.stop_reason)
                content = response.message.get("content") or []
                self.turn_text = "".join(block["text"] for block in content if "text" in block)
                usage = (response.message.get("metadata") or {}).get("usage") or {}
                self.turn_usage = _usage(usage, self.built.provider)
            return
        if self._done() or event.exception is self.fatal:
            return
        failure = classify(event.exception, self.built)
        self.attempt += 1
        directive = await self.hook({"type": "error", "error": failure.to_json(), "attempt": self.attempt})
        if not directive.get("retry"):
            self.failure = failure.error(event.exception)
            return
        delay = max(0.0, float(directive.get("delay") or 0))
        await self.hook({"type": "retry", "attempt": self.attempt, "delay": delay, "error": failure.to_json()})
        try:
            await self._sleep(delay)
        except Cancelled as exc:
            self._fail(exc)
            raise
        event.retry = True

    async def _before_tool(self, event: BeforeToolCallEvent) -> None:
        if self._done():
            event.cancel_tool = "Tool execution cancelled"
            return
        tool_use = event.tool_use
        args = tool_use.get("input")
        call = {
            "type": "tool-call",
            "tool": tool_use["name"],
            "args": args if isinstance(args, dict) else {},
            "id": tool_use["toolUseId"],
        }
        directive = await self.hook(call)
        if directive.get("deny"):
            text = f"Tool call denied: {directive['deny']}"
            event.cancel_tool = text
            await self.hook({**call, "type": "tool-result", "result": {"text": text, "error": True}})

    async def _after_tools(self, event: AfterToolsEvent) -> None:
        if self._done():
            return
        directive = await self._turn_end()
        if directive.get("stop"):
            self.stopped = directive.get("result", self.turn_text)
            event.end_turn = "Done."
        elif directive.get("continue") and directive.get("message"):
            event.message["content"].append({"text": str(directive["message"])})


#: Providers whose input-token count includes the prompt-cache reads and writes (OpenAI's
#: ``prompt_tokens``; LiteLLM reports every model, ``anthropic/`` ones too, that way).
_CACHE_IN_INPUT = frozenset({"openai", "litellm"})


def _usage(usage: dict[str, Any], provider: str) -> dict[str, int]:
    """A turn's usage in Bedrock's convention, whatever the provider's: ``input_tokens``
    without the cache reads and writes, which have keys of their own (so a total or a
    price counts each token once); each count clamped (the endpoint is not trusted)."""
    out = {"input_tokens": usage.get("inputTokens"), "output_tokens": usage.get("outputTokens")}
    for source, key in (("cacheReadInputTokens", "cache_read_tokens"), ("cacheWriteInputTokens", "cache_write_tokens")):
        if usage.get(source):
            out[key] = usage[source]
    clamped = clamp_usage(out)
    if provider in _CACHE_IN_INPUT:
        cached = clamped.get("cache_read_tokens", 0) + clamped.get("cache_write_tokens", 0)
        clamped["input_tokens"] = max(0, clamped["input_tokens"] - cached)
    return clamped


class InvokeTool(AgentTool):
    """The one tool the model gets: runs its code through the agent's invoke callback."""

    def __init__(self, session: Session) -> None:
        super().__init__()
        self.session = session
        self._spec = {
            "name": INVOKE_TOOL["name"],
            "description": INVOKE_TOOL["description"],
            "inputSchema": {"json": INVOKE_TOOL["input_schema"]},
        }

    @property
    def tool_name(self) -> str:
        return INVOKE_TOOL["name"]

    @property
    def tool_spec(self) -> Any:
        return self._spec

    @property
    def tool_type(self) -> str:
        return "agent-apps"

    async def stream(self, tool_use: Any, invocation_state: dict[str, Any], **kwargs: Any) -> Any:
        session = self.session
        args = tool_use.get("input")
        code = args.get("code") if isinstance(args, dict) else None
        if session._done():
            result: dict[str, Any] = {"text": "Tool execution cancelled", "error": True}
        elif not isinstance(code, str):
            result = {"text": "invoke takes one argument, 'code': a string of Python source.", "error": True}
        else:
            try:
                result = await session.ctx.manager.invoke(session.invoke_ref, {"code": code})
            except Exception as exc:
                session._fail(exc)
                result = {"text": f"{type(exc).__name__}: {exc}", "error": True}
        if not session._done():
            report = {"type": "tool-result", "tool": tool_use["name"], "args": args, "result": result}
            try:
                await session.hook({**report, "id": tool_use["toolUseId"]})
            except Exception:
                pass  # recorded by hook(): the loop stops at the next checkpoint
        yield {
            "toolUseId": tool_use["toolUseId"],
            "status": "error" if result.get("error") else "success",
            "content": [{"text": str(result.get("text", ""))}],
        }
