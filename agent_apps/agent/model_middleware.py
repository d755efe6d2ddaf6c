"""Model-level middleware: a Koa onion around each model call of an agent run.

A middleware skill with ``metadata.level: model`` has the same ``main(ctx, args)`` shape
as any middleware; ``ctx.target`` is the model call, an invocation of the built-in
``model-call`` skill whose args are what is about to be sent::

    {"messages": [...], "system": "...", "turn": N, "attempt": A}   # neutral messages

``await ctx.manager.next(new_args)`` sends the call on (changed, when ``new_args`` is
given) and returns the model's answer (a :data:`~agent_apps.agent.model_calls.ModelResponse`
dict); a middleware may return a changed answer, or answer itself without calling
``next()`` (a cache, a canned reply).

The provider makes the call, so the onion is split over its two hook events: on
``model-call`` it runs until the innermost ``next()`` (whose args become the directive's
``messages``/``system``) or until a middleware answers without it (the directive's
``response``); on ``model-response`` the innermost ``next()`` returns the model's answer
and the onion unwinds, and what it returns, when changed, is the directive's
``response`` (the provider is started with ``buffer_responses``). A failed model call
(the ``error`` event) makes the innermost ``next()`` raise, so every middleware's
``finally`` runs; the provider's retry is a new call, with a new onion.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..context import Context
from ..errors import AgentAppsError
from ..middleware import AGENT, MiddlewareFn, compose, level_of, served_middleware
from ..skill import Skill
from ..validation import schema_problem
from .model_calls import RESPONSE_SCHEMA

if TYPE_CHECKING:
    from ..manager import ContextManager

__all__ = ["MODEL_CALL", "ModelCallFailed", "ModelMiddleware", "model_call_context", "model_level_middleware"]

#: The invocation a model-level middleware (and a guardrail) sees as ``ctx.target``.
MODEL_CALL = Skill(
    name="model-call",
    description="One model call of an agent run: what is sent to the model.",
    params={
        "type": "object",
        "properties": {
            "messages": {"type": "array", "items": {"type": "object"}},
            "system": {"type": "string"},
            "turn": {"type": "integer"},
            "attempt": {"type": "integer"},
            "response": {"type": "object"},
        },
        "required": ["messages", "system"],
    },
    metadata={"visibility": "hidden", "tags": ["meta-internal"]},
    kind="anonymous",
    origin="agent",
)


class ModelCallFailed(AgentAppsError):
    """What the innermost ``next()`` of a model-level middleware raises when the model
    call failed (or the run ended before it answered)."""


def model_call_context(caller: Context, event: dict[str, Any]) -> Context:
    """The model call of ``event`` as an invocation (a child of ``caller``'s: the
    agent's, or the ``llm`` skill's)."""
    args = {
        "messages": list(event.get("messages") or ()),
        "system": str(event.get("system") or ""),
        "turn": int(event.get("turn") or 1),
        "attempt": int(event.get("attempt") or 1),
    }
    return Context(caller.manager.context_manager, MODEL_CALL, args, caller)


class ModelMiddleware:
    """The interceptor (see :mod:`.model_calls`) that runs the model-level onion."""

    needs_messages = True
    changes_responses = True

    def __init__(self, caller: Context, name: str, middleware: Sequence[MiddlewareFn]) -> None:
        #: the invocation whose model calls these are, and its name for errors
        self.caller, self.name = caller, name
        self.onion = compose(middleware)
        #: the onion of the call in flight: (its task, the future of the model's answer)
        self._pending: tuple[asyncio.Task[Any], asyncio.Future[Any]] | None = None

    async def model_call(self, event: dict[str, Any]) -> dict[str, Any] | None:
        self.abort("a new model call began")  # the last one never answered (its error was reported)
        loop = asyncio.get_running_loop()
        ctx = model_call_context(self.caller, event)
        sent: asyncio.Future[dict[str, Any]] = loop.create_future()
        answer: asyncio.Future[Any] = loop.create_future()

        async def model(call: Context) -> Any:  # the innermost next(): the provider calls the model
            sent.set_result(call.args)
            return await answer

        task = asyncio.ensure_future(self.onion(ctx, model))
        await asyncio.wait({sent, task}, return_when=asyncio.FIRST_COMPLETED)
        if not sent.done():  # a middleware answered (or failed) without calling next()
            response = task.result()
            return {"response": self._checked(response)}
        self._pending = (task, answer)
        request = sent.result()
        directive: dict[str, Any] = {}
        if request["messages"] != list(event.get("messages") or ()):
            directive["messages"] = request["messages"]
        if request["system"] != str(event.get("system") or ""):
            directive["system"] = request["system"]
        return directive

    async def model_response(self, event: dict[str, Any]) -> dict[str, Any] | None:
        if self._pending is None:  # answered before us (a journal's replay, a middleware)
            return None
        task, answer = self._pending
        self._pending = None
        original = event["response"]
        answer.set_result(original)
        response = await task
        if response is None or response == original:
            return None
        return {"response": self._checked(response)}

    def abort(self, why: str) -> None:
        """The call in flight will never be answered: make its innermost ``next()`` raise
        (the onion unwinds in the background; its error is not the run's)."""
        if self._pending is None:
            return
        task, answer = self._pending
        self._pending = None
        if not answer.done():
            answer.set_exception(ModelCallFailed(f"the model call failed: {why}"))
        task.add_done_callback(lambda t: t.cancelled() or t.exception())  # retrieved: no warning

    def _checked(self, response: Any) -> Any:
        problem = schema_problem(RESPONSE_SCHEMA, response)
        if problem is not None or not isinstance(response, dict):
            where = f" at {problem[0]}: {problem[1]}" if problem else ""
            raise AgentAppsError(
                f"{self.name}: a model-level middleware returned something that is not a model response{where}",
                skill=self.name,
            )
        return response


def model_level_middleware(
    cm: ContextManager, inherited: Sequence[MiddlewareFn], served: Sequence[Context], config: dict[str, Any]
) -> list[MiddlewareFn]:
    """The model-level middleware around the model calls made for ``served`` (the
    invocations whose own middleware lists count), once each, outermost first: what an
    enclosing agent hands down (``inherited``), the served invocations', then the
    ``middleware`` refs of the ``model`` config ``config``."""
    refs = [ref for ref in config.get("middleware") or () if ref != AGENT]
    own = [cm._middleware_fn(ref) for ref in refs]
    sources = [inherited, *(served_middleware(cm, ctx, "model") for ctx in served), own]
    fns: list[MiddlewareFn] = []
    for fn in (fn for source in sources for fn in source):
        if level_of(fn) == "model" and fn not in fns:
            fns.append(fn)
    return fns
