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
(they are handed down in the ``agent`` scope). A feature that sits around model calls
(compaction during a long run, say) is one more interceptor registered here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..middleware import AGENT, MiddlewareFn, level_of, served_middleware
from .guardrails import guardrails_for
from .model_middleware import ModelMiddleware

if TYPE_CHECKING:
    from .run import AgentRun

__all__ = ["arrange_model_calls"]


def arrange_model_calls(run: AgentRun) -> ModelMiddleware | None:
    """Register ``run``'s guardrails and model-level middleware around its model calls,
    inside the journal; returns the middleware onion (None: no model-level middleware)."""
    settings, cm = run.settings, run.cm
    inherited_fns, inherited_guards = settings.inherited or ([], [])
    fns: list[MiddlewareFn] = []
    sources = [inherited_fns, served_middleware(cm, run.ctx, "model")]
    if settings.served is not run.ctx:
        sources.append(served_middleware(cm, settings.served, "model"))
    refs = [ref for ref in settings.config.get("middleware") or () if ref != AGENT]
    sources.append([cm._middleware_fn(ref) for ref in refs])
    for fn in (fn for source in sources for fn in source):
        if level_of(fn) == "model" and fn not in fns:
            fns.append(fn)
    own = settings.config.get("guardrails") or []
    refs = own if not isinstance(own, list) else [*inherited_guards, *(r for r in own if r not in inherited_guards)]
    # where the guardrails were set, for their errors: the cascade again, so only when there are some
    source = cm.config_for(settings.served.skill).sources.get("model.guardrails", "config") if refs else "config"
    guards = {g.kind: g for g in guardrails_for(run, refs, source)}
    # agents this run's code starts keep its guardrails and model-level middleware
    run.scope["around_model_calls"] = (fns, refs)
    middleware = ModelMiddleware(run, fns) if fns else None
    around = [guards.get("input"), guards.get("output"), middleware]
    run.model_calls.interceptors += [interceptor for interceptor in around if interceptor is not None]
    return middleware
