"""What sits around each model call of one agent run, and in which order.

The features that see (and may change) what is sent to the model and what comes back
are interceptors of the run's :class:`~.model_calls.ModelCalls`, an onion whose first
layer is the outermost:

1. the journal of a durable run (durable.py, registered when the run opens it): a
   replayed answer meets nothing else;
2. compaction during the run (compaction.py, with a provider that reports its model
   calls, unless ``model.compaction.during_run`` is false): what comes after it sees
   the compacted window;
3. the input guardrails, then the output guardrails (guardrails.py): input guardrails
   see the call before middleware changes it, output guardrails the answer after;
4. the model-level middleware onion (model_middleware.py).

An agent started by this run's code keeps its guardrails and model-level middleware
(they are handed down in the ``agent`` scope). A one-shot model call made below it
(``ctx.llm``, one_shot.py) keeps its model-level middleware; guardrails judge an agent's
turns only. A feature that sits around model calls
is one more interceptor registered here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..state.window import compaction_options
from .compaction import RunCompaction
from .guardrails import guardrails_for
from .model_middleware import ModelMiddleware, model_level_middleware

if TYPE_CHECKING:
    from .run import AgentRun

__all__ = ["arrange_model_calls"]


def arrange_model_calls(run: AgentRun, *, reported: bool) -> ModelMiddleware | None:
    """Register ``run``'s compaction, guardrails and model-level middleware around its
    model calls, inside the journal; returns the middleware onion (None: no model-level
    middleware). ``reported``: the provider reports its model calls (compaction during
    the run needs it; the others refuse a provider that does not)."""
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
    compacting = reported and compaction_options(settings.config.get("compaction"))["during_run"]
    around = [RunCompaction(run) if compacting else None, guards.get("input"), guards.get("output"), middleware]
    run.model_calls.interceptors += [interceptor for interceptor in around if interceptor is not None]
    return middleware

