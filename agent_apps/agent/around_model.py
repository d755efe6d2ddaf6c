"""What sits around each model call of one agent run, and in which order.

The features that see (and may change) what is sent to the model and what comes back
are interceptors of the run's :class:`~.model_calls.ModelCalls`, an onion whose first
layer is the outermost:

1. the journal of a durable run (durable.py, registered when the run opens it): a
   replayed answer meets nothing else;
2. the input guardrails, then the output guardrails (guardrails.py): input guardrails
   see the call before middleware changes it, output guardrails the answer after;
3. the model-level middleware onion (model_middleware.py).

An agent started by this run's code keeps its guardrails and model-level middleware
(they are handed down in the ``agent`` scope). A one-shot model call made below it
(``ctx.llm``, one_shot.py) keeps its model-level middleware; guardrails judge an agent's
turns only. A feature that sits around model calls (compaction during a long run, say)
is one more interceptor registered here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..middleware import AGENT, MiddlewareFn, level_of, served_middleware
from .guardrails import guardrails_for
from .model_middleware import ModelMiddleware

if TYPE_CHECKING:
    from ..context import Context
    from ..manager import ContextManager
    from .run import AgentRun

__all__ = ["arrange_model_calls", "model_level_middleware"]


def arrange_model_calls(run: AgentRun) -> ModelMiddleware | None:
    """Register ``run``'s guardrails and model-level middleware around its model calls,
    inside the journal; returns the middleware onion (None: no model-level middleware)."""
    settings, cm = run.settings, run.cm
    inherited_fns, inherited_guards = settings.inherited or ([], [])
    served = [run.ctx] if settings.served is run.ctx else [run.ctx, settings.served]
    fns = model_level_middleware(cm, inherited_fns, served, settings.config)
    source = cm.config_for(settings.served.skill).sources.get("model.guardrails", "config")
    own = settings.config.get("guardrails") or []
    refs = own if not isinstance(own, list) else [*inherited_guards, *(r for r in own if r not in inherited_guards)]
    guards = {g.kind: g for g in guardrails_for(run, refs, source)}
    # agents this run's code starts keep its guardrails and model-level middleware
    run.scope["around_model_calls"] = (fns, refs)
    middleware = ModelMiddleware(run.ctx, settings.name, fns) if fns else None
    around = [guards.get("input"), guards.get("output"), middleware]
    run.model_calls.interceptors += [interceptor for interceptor in around if interceptor is not None]
    return middleware


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
