"""Guardrails: skills that judge what an agent sends to its model and what comes back.

A guardrail is a skill with ``metadata.role: guardrail`` and ``metadata.kind: input``
(checked before each model call) or ``output`` (after each model response), activated
per agent by ``model.guardrails: [name, "name(key=value)", ...]``. Like a middleware, its
``main(ctx, args)`` gets its own params as ``args`` and the model call as
``ctx.target`` (args ``messages``, ``system``, ``turn``, ``attempt``; an output guardrail
also ``response``), and returns a decision::

    {"pass": bool, "tripwire": bool, "reason": "...", "severity": "low|medium|high|critical"}

Guardrails of a kind run in the order listed; each decision is a ``guardrail`` event
(and a trace entry); the first decision that fails with ``tripwire: true`` ends the run
with status ``guardrail`` and its reason as the error message
(:class:`~agent_apps.errors.GuardrailTripped`). A failed check without a tripwire is
reported and the run goes on.

Input guardrails see the call as the agent makes it, before model-level middleware
changes it; output guardrails see the answer as the agent will act on it, after.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .._syntax import parse_call
from ..errors import AgentAppsError, ConfigError, GuardrailTripped, SkillNotFound
from ..skill import Skill
from ..validation import coerce_params, validate_args
from .model_middleware import model_call_context

if TYPE_CHECKING:
    from .run import AgentRun

__all__ = ["DECISION_SCHEMA", "Guardrails", "guardrails_for"]

SEVERITIES = ("low", "medium", "high", "critical")

#: What a guardrail returns.
DECISION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "pass": {"type": "boolean"},
        "tripwire": {"type": "boolean"},
        "reason": {"type": "string"},
        "severity": {"enum": list(SEVERITIES)},
    },
    "required": ["pass"],
}


class Guardrails:
    """The guardrails of one kind of one agent run: an interceptor of its model calls."""

    changes_responses = False

    def __init__(self, run: AgentRun, kind: str, checks: Sequence[tuple[Skill, dict[str, Any]]]) -> None:
        self.run = run
        self.kind = kind
        self.checks = list(checks)
        self.needs_messages = True
        # the provider must wait for the whole answer and this verdict before acting on it
        self.changes_responses = kind == "output"

    async def model_call(self, event: dict[str, Any]) -> dict[str, Any] | None:
        if self.kind == "input":
            await self._check(event)
        return None

    async def model_response(self, event: dict[str, Any]) -> dict[str, Any] | None:
        if self.kind == "output":
            await self._check(event)
        return None

    async def _check(self, event: dict[str, Any]) -> None:
        run = self.run
        target = model_call_context(run.ctx, event)
        if self.kind == "output":
            target.args["response"] = event.get("response")
        for skill, params in self.checks:
            decision = await run.ctx.manager.invoke(skill, params, target=target, system=True)
            problem = _decision_problem(decision)
            if problem is not None:
                raise AgentAppsError(
                    f"guardrail {skill.name!r} returned {problem}; it must return {{'pass': bool, 'tripwire': bool, "
                    "'reason': str, 'severity': low|medium|high|critical}",
                    skill=skill.name,
                )
            run.reporter.guardrail_decision(skill.name, self.kind, target.args["turn"], decision)
            if not decision["pass"] and decision.get("tripwire"):
                reason = decision.get("reason") or f"guardrail {skill.name!r} tripped"
                raise GuardrailTripped(skill.name, reason, kind=self.kind, severity=decision.get("severity"))


def guardrails_for(run: AgentRun, refs: Any, source: str) -> list[Guardrails]:
    """The input and output guardrails named by ``model.guardrails`` (set in
    ``source``), checked: each must be a guardrail skill and its params valid."""
    if not refs:
        return []
    if not isinstance(refs, list) or not all(isinstance(r, str) for r in refs):
        raise ConfigError("model.guardrails must be a list of guardrail names", path=source)
    by_kind: dict[str, list[tuple[Skill, dict[str, Any]]]] = {"input": [], "output": []}
    for ref in refs:
        try:
            name, pairs = parse_call(ref)
        except ValueError as exc:
            raise ConfigError(f"model.guardrails: {ref!r}: {exc}", path=source) from None
        try:
            skill = run.cm.get(name)
        except SkillNotFound as exc:
            raise ConfigError(f"model.guardrails: {exc}", path=source) from None
        if skill.metadata.get("role") != "guardrail":
            raise ConfigError(
                f"model.guardrails: {name!r} is not a guardrail (a guardrail has metadata.role: guardrail "
                f"and metadata.kind: input or output; {skill.where()})",
                path=source,
            )
        params = validate_args(skill, coerce_params(skill.params, pairs))
        by_kind[str(skill.metadata.get("kind"))].append((skill, params))
    return [Guardrails(run, kind, checks) for kind, checks in by_kind.items() if checks]


def _decision_problem(decision: Any) -> str | None:
    from ..validation import schema_problem

    if not isinstance(decision, dict):
        return f"{type(decision).__name__}, not a decision"
    problem = schema_problem(DECISION_SCHEMA, decision)
    return f"a bad decision ({problem[0]}: {problem[1]})" if problem else None
