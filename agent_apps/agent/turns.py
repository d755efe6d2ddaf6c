"""The turn policy: the hook callback, which hears each step of a turn and decides the next.

The provider runs the model loop; at every step it reports a hook event and does what
the directive returned says. :meth:`TurnPolicy.hook` traces the event, hands it to the
recorder and to the handler named after it (``turn-end`` -> ``_on_turn_end``):

=============  =================================  ==========================================
type           fields                             directive returned
=============  =================================  ==========================================
turn-start     turn                               None (raises LimitExceeded past max_turns)
message        text, delta?                       None
reasoning      text, delta?                       None
tool-call      tool, args, id?                    {allow: true} or {deny: reason}
tool-result    tool, args, result, id?            None
turn-end       turn, result (text), usage?,       {stop: true, result} or {continue: true, message?};
               latency_ms?, stop_reason?          at max_turns or max_steps: stop with the partial
                                                  result (see "Run statuses" in run.py)
error          error {type, message, retryable},  {retry: true, delay} or {stop: true}
               attempt
retry          attempt, delay, error?             None
context-edit   removed, kept, reason?             None (see docs/agent.md, "context_edit")
model-call     turn, attempt, messages?, system?, {response?, messages?, system?} (see model_calls.py)
               provider?, model?                  (the last two name the model call's tracing span)
model-response turn, attempt, response,           {response?}
               latency_ms, replayed
=============  =================================  ==========================================

A model call holds one of its provider's admission slots (admission.py) from the moment
it is about to be made until the model answers (:class:`ModelSlot`).

Once the run is asked to stop (stopping.py) the policy lets the turn in progress end
and starts no other: a model call not yet made is answered with an empty answer
(:data:`STOPPED_RESPONSE`), tool calls are denied, and ``turn-end`` says ``stop`` with
the model's last text. A turn that would start after that is refused with
:class:`~agent_apps.errors.RunStopped`, which the run takes as the same graceful end.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import tracing
from ..budget import with_clamped_usage
from ..errors import AgentAppsError, LimitExceeded, MiddlewareTermination, RunStopped
from ..validation import schema_problem
from .limits import check_budget
from .model_calls import RESPONSE_SCHEMA
from .prompt import INVOKE_TOOL, returns_reminder

if TYPE_CHECKING:
    from ..admission import Gate
    from ..context import Context
    from .model_middleware import ModelMiddleware
    from .run import AgentRun

__all__ = ["HOOK_PARAMS", "STOPPED_RESPONSE", "STOP_MESSAGES", "ModelSlot", "TurnPolicy"]

#: The hook callback's args: one event, tagged by ``type``.
HOOK_PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "type": {
            "enum": [
                "turn-start",
                "message",
                "reasoning",
                "tool-call",
                "tool-result",
                "turn-end",
                "error",
                "retry",
                "context-edit",
                "model-call",
                "model-response",
            ]
        }
    },
    "required": ["type"],
}

#: The terminal message of a run stopped at a cap, by status.
STOP_MESSAGES = {
    "max_turns": "Stopped: maximum turn limit reached",
    "max_steps": "Stopped: maximum step limit reached",
}
#: The answer to a model call that was not made because the run is stopping: the
#: provider acts on it as on the model's, and the turn ends without a tool call.
STOPPED_RESPONSE: dict[str, Any] = {
    "text": "",
    "tool_calls": [],
    "usage": {"input_tokens": 0, "output_tokens": 0},
    "stop_reason": "stopped",
}
#: What a persistent agent is told when its turn ends without a tool call.
_CONTINUE = "Continue."


class ModelSlot:
    """One of the provider's admission slots, held while a model call is in flight,
    and the tracing span of that call."""

    def __init__(self, run: AgentRun) -> None:
        self.run = run
        self._gate: Gate | None = None
        self._span: tracing.Span | None = None

    async def acquire(self, parent: tracing.Span | Context, event: dict[str, Any] | None = None) -> None:
        """A model call is about to be made: wait for a slot of the provider's. Its span
        is ``chat MODEL``: the model and provider its ``model-call`` event names, else
        ``model.model_id`` and the provider skill."""
        if self._gate is None:
            run = self.run
            gate = run.cm.admission.model_calls(run.settings.provider)
            await gate.acquire(run.record.priority, run.ctx.signal)
            self._gate = gate
            event = event or {}
            model = event.get("model") or run.settings.config.get("model_id")
            self._span = tracing.start_span(f"chat {model}" if model else "chat", parent)
            tracing.gen_ai(self._span, "chat", model=model, provider=event.get("provider") or run.settings.provider)

    def release(self, usage: dict[str, Any] | None = None, finish_reason: str | None = None) -> None:
        """The model answered (with ``usage``, for ``finish_reason``), failed, or the run
        ended: free the slot."""
        if self._gate is not None:
            self._gate.release()
            self._gate = None
            tracing.gen_ai(self._span, usage=usage, finish_reason=finish_reason)
            tracing.end(self._span)
            self._span = None


class TurnPolicy:
    """The hook callback of one agent run (see the module docstring)."""

    def __init__(self, run: AgentRun) -> None:
        self.run = run
        self.slot = ModelSlot(run)
        #: The provider reports its model calls (``model-call`` events).
        self.reports_model_calls = False
        #: The model-level middleware onion around the model calls, if any (around_model.py).
        self.model_middleware: ModelMiddleware | None = None
        #: Tool calls in this turn's model answer, when the provider reported it.
        self.tool_calls: int | None = None
        #: The report of the step (turn) that just ended, for the ``turn-end`` event.
        self.step: dict[str, Any] | None = None
        self._text: list[str] = []  # this turn's message text
        self._calls = 0  # tool calls this turn
        self._span: tracing.Span | None = None
        self._answered_stop = False  # the model call in flight was answered with STOPPED_RESPONSE

    async def hook(self, ctx: Context, event: dict[str, Any]) -> dict[str, Any] | None:
        """Hear one hook event and return its directive (see the module docstring)."""
        run = self.run
        if run.state.halted is not None:
            raise run.state.halted
        event = with_clamped_usage(event)  # a peer's token counts, before anything counts them
        kind = event["type"]
        # A model call's messages repeat the whole conversation: the trace keeps the rest.
        skip = ("type", "messages", "system") if kind == "model-call" else ("type",)
        run.reporter.trace(kind, {k: v for k, v in event.items() if k not in skip})
        recorder = run.recorder
        if recorder is not None:
            recorder.observe(event)
        handler = getattr(self, "_on_" + kind.replace("-", "_"), None)
        if kind != "turn-end" or recorder is None:
            directive = await handler(event) if handler is not None else None
            await run.reporter.flow()  # a reader of the run's events that is behind holds it here
            return directive
        self.step = recorder.close_step(event)
        directive = None
        try:
            directive = await handler(event)  # type: ignore[misc]
        finally:  # the turn happened, whatever the policy decides: its messages are stored
            sandbox = run.executor.sandbox
            await recorder.end_turn(event, directive, sandbox.memory if sandbox is not None else None)
        await run.reporter.flow()
        return directive

    def close(self) -> None:
        """The run ended: free the model slot, end the model-level onion of a call that
        will not be answered, and end the turn's span."""
        self.slot.release()
        if self.model_middleware is not None:
            self.model_middleware.abort("the run ended")
        tracing.end(self._span)

    # -- a turn ------------------------------------------------------------------------

    async def _on_turn_start(self, event: dict[str, Any]) -> None:
        run = self.run
        state, settings = run.state, run.settings
        state.turn = int(event.get("turn") or state.turn + 1)
        self._text, self._calls, self.tool_calls = [], 0, None
        if state.turn > settings.max_turns:  # the provider ignored the stop directive
            state.status = "max_turns"
            raise LimitExceeded(f"{settings.name}: turn limit ({settings.max_turns}) reached", skill=settings.name)
        stopping = run.stopper.reason
        if stopping is not None:  # no further turn starts: the run takes this as its graceful end
            raise RunStopped(stopping, skill=settings.name)
        check_budget(state, run.record.ledger.start_turn)  # type: ignore[union-attr]
        tracing.end(self._span)
        self._span = tracing.start_span(f"turn {state.turn}", run.ctx, {"agent_apps.turn": state.turn})
        run.reporter.emit("turn-start", turn=state.turn)
        if not self.reports_model_calls:  # the model call follows (no model-call event will say so)
            await self.slot.acquire(self._span or run.ctx)

    async def _on_model_call(self, event: dict[str, Any]) -> dict[str, Any]:
        run = self.run
        self._answered_stop = False
        directive: dict[str, Any] = {}
        if run.stopper.reason is None:
            try:
                directive = await run.model_calls.on_call(event)
            except MiddlewareTermination as halt:  # a model-level middleware stops the run
                run.stopper.request(_halted(halt))
        if run.stopper.reason is not None:  # no new model call: the turn ends, and the run
            self._answered_stop = True
            return {"response": STOPPED_RESPONSE}
        run.reporter.emit("model-call", turn=event.get("turn"), attempt=event.get("attempt"))
        if "response" not in directive:  # the model is called now
            await self.slot.acquire(self._span or run.ctx, event)
        return directive

    async def _on_model_response(self, event: dict[str, Any]) -> dict[str, Any]:
        response = event["response"] if isinstance(event.get("response"), dict) else {}
        self.slot.release(response.get("usage"), response.get("stop_reason"))
        if self._answered_stop:  # the policy's own empty answer: no interceptor saw its call
            return {}
        problem = schema_problem(RESPONSE_SCHEMA, event.get("response"))
        if problem is not None:
            path, message = problem
            name = self.run.settings.name
            raise AgentAppsError(
                f"{name}: provider {self.run.settings.provider!r} reported a malformed model response "
                f"({path}: {message})",
                skill=name,
            )
        try:
            directive = await self.run.model_calls.on_response(event)
        except MiddlewareTermination as halt:  # the answer stands; the run stops after this turn
            self.run.stopper.request(_halted(halt))
            directive = {}
        response = directive.get("response", event["response"])
        self.tool_calls = len(response.get("tool_calls") or ())
        fields = {k: event.get(k) for k in ("turn", "attempt", "latency_ms", "replayed")}
        self.run.reporter.emit("model-response", **fields, response={k: v for k, v in response.items() if k != "meta"})
        return directive

    async def _on_message(self, event: dict[str, Any]) -> None:
        text = str(event.get("text") or "")
        self._text.append(text)
        self.run.reporter.emit("agent-message", text=text, delta=bool(event.get("delta")))

    async def _on_reasoning(self, event: dict[str, Any]) -> None:
        text = str(event.get("text") or "")
        self.run.reporter.emit("agent-message", text=text, delta=bool(event.get("delta")), reasoning=True)

    async def _on_tool_call(self, event: dict[str, Any]) -> dict[str, Any]:
        self.slot.release()
        self._calls += 1
        args = event.get("args") or {}
        self.run.reporter.emit("tool-call", tool=event.get("tool"), code=args.get("code"), id=event.get("id"))
        if event.get("tool") != INVOKE_TOOL["name"]:
            return self._deny(f"unknown tool {event.get('tool')!r}: the only tool is 'invoke'")
        if self.run.state.finished:
            return self._deny("the task is already finished")
        stopping = self.run.stopper.reason
        if stopping is not None:
            return self._deny(f"the run was stopped ({stopping}): no more code runs")
        return {"allow": True}

    def _deny(self, reason: str) -> dict[str, Any]:
        """Deny the tool call just announced: its code will not run."""
        recorder = self.run.recorder
        if recorder is not None:
            recorder.skipped()
        return {"deny": reason}

    async def _on_tool_result(self, event: dict[str, Any]) -> None:
        result = event.get("result") or {}
        error = isinstance(result, dict) and result.get("error")
        text = result.get("text") if isinstance(result, dict) else str(result)
        kind = "tool-error" if error else "tool-result"
        self.run.reporter.emit(kind, tool=event.get("tool"), result=text, id=event.get("id"))

    async def _on_turn_end(self, event: dict[str, Any]) -> dict[str, Any]:
        run = self.run
        state, settings = run.state, run.settings
        usage: dict[str, Any] = event["usage"] if isinstance(event.get("usage"), dict) else {}
        self.slot.release(usage, event.get("stop_reason"))
        for key in ("input_tokens", "output_tokens"):
            state.usage[key] += int(usage.get(key) or 0)
        if usage.get("estimated"):  # a provider that could only guess says so
            state.usage["estimated"] = True
        text = event.get("result")
        if text is None:
            text = "".join(self._text)
        if isinstance(text, str) and text.strip():
            state.last_text = text.strip()
        run.reporter.emit("turn-end", turn=state.turn, usage=event.get("usage"), step=self.step)
        tracing.end(self._span)
        self._span = None
        ledger = run.record.ledger
        price = settings.supervision.price
        ledger.charge(usage, price.cost(usage) if price is not None else 0.0)  # type: ignore[union-attr]
        check_budget(state, ledger.check)  # type: ignore[union-attr]
        return self._next_turn(text)

    def _next_turn(self, text: Any) -> dict[str, Any]:
        """The turn-end directive: stop with the result, or continue (with a message)."""
        state, settings = self.run.state, self.run.settings
        if state.finished:
            return {"stop": True, "result": state.value}
        stopping = self.run.stopper.reason
        if stopping is not None:
            return {"stop": True, "result": self.stopped(stopping)}
        if state.exhausted:
            return self._stop("max_steps", f"{settings.max_steps} invoke calls")
        if self._calls:
            directive: dict[str, Any] = {"continue": True}
        elif settings.persistent:
            directive = {"continue": True, "message": _CONTINUE}
        elif settings.returns is not None:
            directive = {"continue": True, "message": returns_reminder(settings.returns)}
        else:
            return {"stop": True, "result": text}
        if state.turn >= settings.max_turns:
            return self._stop("max_turns", f"{settings.max_turns} turns")
        return directive

    def _stop(self, status: str, limit: str) -> dict[str, Any]:
        """End the run gracefully at a cap: the partial result is the model's last text
        and the terminal message. A run that must ``finish()`` a schema cannot end with
        text, so it fails with LimitExceeded (the trace and memory are kept all the same)."""
        state, settings = self.run.state, self.run.settings
        message = state.published["message"] = STOP_MESSAGES[status]
        state.status = status
        if settings.returns is not None:
            raise LimitExceeded(
                f"{settings.name}: {message} ({limit}) before a valid ctx.manager.finish() value", skill=settings.name
            )
        state.stopped = f"{state.last_text}\n\n{message}" if state.last_text else message
        return {"stop": True, "result": state.stopped}

    def stopped(self, reason: str) -> Any:
        """End the run gracefully because it was asked to stop: status ``stopped``, and
        the partial result is the model's last text. A run that must ``finish()`` a
        schema cannot end with text: it fails with RunStopped (its status stays)."""
        state, settings = self.run.state, self.run.settings
        state.status = "stopped"
        state.published["message"] = f"Stopped: {reason}"
        if settings.returns is not None:
            raise RunStopped(
                reason,
                skill=settings.name,
                message=f"{settings.name}: the run was stopped ({reason}) before a valid ctx.manager.finish() value",
            )
        state.stopped = state.last_text
        return state.stopped

    # -- failures ----------------------------------------------------------------------

    async def _on_error(self, event: dict[str, Any]) -> dict[str, Any]:
        settings = self.run.settings
        self.slot.release()
        if self.model_middleware is not None:
            self.model_middleware.abort(str((event.get("error") or {}).get("message") or "error"))
        error = event.get("error") or {}
        attempt = int(event.get("attempt") or 1)
        retryable = bool(error.get("retryable")) if isinstance(error, dict) else False
        self.run.reporter.emit("agent-error", error=error, attempt=attempt)
        if self.run.stopper.reason is not None:  # no retry: the run ends (stopped) here
            return {"stop": True}
        if settings.persistent or (retryable and attempt <= settings.max_retries):
            base = float(settings.config.get("retry_delay", 1.0))
            return {"retry": True, "delay": min(base * 2 ** (attempt - 1), 30.0)}
        return {"stop": True}

    async def _on_retry(self, event: dict[str, Any]) -> None:
        self.run.reporter.emit("agent-error", retrying=True, attempt=event.get("attempt"), delay=event.get("delay"))


def _halted(halt: MiddlewareTermination) -> str:
    """The stop reason of a run whose model-level middleware halted its chain."""
    return f"{halt.middleware}: {halt.reason}" if halt.middleware else halt.reason
