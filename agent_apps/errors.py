"""Typed errors. Every error agent-apps raises derives from :class:`AgentAppsError`.

Errors carry the facts a user needs to fix the problem (skill name, file and line,
argument path, the allowed-tools spec that was checked) as attributes as well as in
the message, so that the command line, the MCP server and the agent can all report
them in their own words without parsing strings.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AgentAppsError",
    "ApprovalPending",
    "ArgsInvalid",
    "BudgetExceeded",
    "Cancelled",
    "ConfigError",
    "GuardrailTripped",
    "LimitExceeded",
    "MiddlewareError",
    "MiddlewareTermination",
    "ReplayDiverged",
    "ResultInvalid",
    "RunStopped",
    "SandboxError",
    "SkillFailed",
    "SkillLoadError",
    "SkillNotFound",
    "ToolNotAllowed",
]


class AgentAppsError(Exception):
    """Base class of every agent-apps error.

    ``skill`` names the skill the error is about, when there is one. ``call_error`` is
    true when the error is about the call itself (which skill, which args, whether it
    is allowed) rather than something that went wrong while the skill ran; the command
    line uses it to pick exit status 2 over 1.
    """

    call_error = False

    def __init__(self, message: str, *, skill: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.skill = skill
        #: How deep in the invocation tree the error was raised (0: the outermost call).
        self.depth: int | None = None

    def __str__(self) -> str:
        return self.message

    def to_json(self) -> dict[str, Any]:
        """A JSON-serializable description, for MCP, events and the agent."""
        data: dict[str, Any] = {"type": type(self).__name__, "message": self.message}
        if self.skill:
            data["skill"] = self.skill
        return data


class SkillNotFound(AgentAppsError):
    """No skill of that name (or that ref) exists on the search path."""

    call_error = True

    def __init__(
        self, ref: str, *, suggestions: list[str] | None = None, reason: str | None = None, path: str | None = None
    ) -> None:
        self.ref = ref
        self.suggestions = suggestions or []
        self.path = path
        hint = f" (did you mean {', '.join(self.suggestions)}?)" if self.suggestions else ""
        hint += f": {reason}" if reason else ""
        what = f"no skill file {path}" if path is not None else f"no skill named {ref!r}"
        super().__init__(what + hint, skill=ref)


class SkillLoadError(AgentAppsError):
    """A skill file is broken: syntax error, bad frontmatter, bad name, missing main.

    Not a call error: the call was fine, the skill is broken (exit status 1)."""

    def __init__(self, message: str, *, path: str, line: int | None = None, skill: str | None = None) -> None:
        self.path = path
        self.line = line
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {message}", skill=skill)
        self.reason = message


class ConfigError(AgentAppsError):
    """A configuration file or value is invalid."""

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None) -> None:
        self.path = path
        self.line = line
        where = f"{path}:{line}: " if path and line else f"{path}: " if path else ""
        super().__init__(f"{where}{message}")


class ArgsInvalid(AgentAppsError):
    """The args of a call do not validate against the skill's ``params`` schema."""

    call_error = True

    def __init__(self, skill: str, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        where = f" at {path}" if path else ""
        super().__init__(f"{skill}: invalid args{where}: {problem}", skill=skill)

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "path": self.path}


class ResultInvalid(AgentAppsError):
    """A skill returned a value that fails ``metadata.returns`` or is not JSON."""

    def __init__(self, skill: str, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        where = f" at {path}" if path else ""
        super().__init__(f"{skill}: invalid result{where}: {problem}", skill=skill)


class ToolNotAllowed(AgentAppsError):
    """The caller's ``allowed-tools`` (or the sandbox's ref rule) forbids this call."""

    call_error = True

    def __init__(
        self, caller: str, callee: str, reason: str, *, spec: str | None = None, path: str | None = None
    ) -> None:
        self.caller = caller
        self.callee = callee
        self.reason = reason
        self.spec = spec
        #: The arg refused, when one is (``allowed_tools``, ``args.config.endpoint_url``).
        self.path = path
        where = f" (at {path})" if path else ""
        super().__init__(f"{caller} may not call {callee}{where}: {reason}", skill=callee)

    def to_json(self) -> dict[str, Any]:
        data = super().to_json()
        if self.path:
            data["path"] = self.path
        return data


class SkillFailed(AgentAppsError):
    """The skill itself raised. The original exception is ``__cause__``."""

    def __init__(self, skill: str, message: str) -> None:
        super().__init__(f"{skill} failed: {message}", skill=skill)
        self.reason = message


class MiddlewareError(SkillFailed):
    """A middleware broke the onion protocol (``next()`` never or twice called)."""


class MiddlewareTermination(AgentAppsError):
    """Raised by a middleware to halt its chain with a reason: the layers inside it and
    the skill do not run, and the call fails with this error, naming the middleware.

    A call error (exit status 2), like a refusal of the policy: the caller can change
    course. Raised by a model-level middleware, it stops the agent run gracefully
    instead (status ``stopped``, see docs/middleware.md).
    """

    call_error = True

    def __init__(self, reason: str, *, middleware: str | None = None) -> None:
        self.reason = reason
        #: The middleware that halted the chain (filled in by the onion when not given).
        self.middleware = middleware
        super().__init__(self._say(reason, middleware), skill=middleware)

    @staticmethod
    def _say(reason: str, middleware: str | None) -> str:
        return f"{middleware} halted the call: {reason}" if middleware else f"halted the call: {reason}"

    def name(self, middleware: str) -> None:
        """Say which middleware halted the chain (once: the innermost one raised it)."""
        if self.middleware is None:
            self.middleware = self.skill = middleware
            self.message = self._say(self.reason, middleware)

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "reason": self.reason, "middleware": self.middleware}


class SandboxError(AgentAppsError):
    """The sandbox could not run agent code (build, trap, limit, transport)."""


class LimitExceeded(AgentAppsError):
    """A configured limit was reached: depth, turns, steps, time, size."""


class BudgetExceeded(LimitExceeded):
    """A run tree used up its execution budget (``model.budget``: tokens, cost, turns,
    deadline) or its spawn budget (``model.spawn``); the run ends with status
    ``budget``. ``limit`` is the config key, ``allowed`` its value, ``used`` the amount."""

    def __init__(
        self,
        limit: str,
        allowed: float,
        used: float,
        *,
        who: str | None = None,
        source: str | None = None,
        note: str = "",
    ) -> None:
        self.limit = limit
        self.allowed = allowed
        self.used = used
        message = f"budget exceeded: {limit} = {_amount(allowed)} reached ({_amount(used)} used{note})"
        if source and source not in ("config", "call", "defaults"):
            message += f" [{limit} set in {source}]"
        super().__init__(f"{who}: {message}" if who else message, skill=who)

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "limit": self.limit, "allowed": self.allowed, "used": self.used}


def _amount(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.6g}"


class GuardrailTripped(AgentAppsError):
    """A guardrail's tripwire ended the run (status ``guardrail``); the message is the
    guardrail's reason."""

    def __init__(self, guardrail: str, reason: str, *, kind: str, severity: str | None = None) -> None:
        self.guardrail = guardrail
        self.reason = reason
        self.kind = kind
        self.severity = severity
        super().__init__(reason, skill=guardrail)

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "guardrail": self.guardrail, "kind": self.kind, "severity": self.severity}


class Cancelled(AgentAppsError):
    """The invocation was cancelled through its signal (or Ctrl-C)."""

    def __init__(self, reason: str = "cancelled", *, skill: str | None = None) -> None:
        super().__init__(reason, skill=skill)


class RunStopped(AgentAppsError):
    """A run was asked to stop gracefully (``cm.stop``, ``agent-apps runs stop``, a
    model-level :class:`MiddlewareTermination`): what agent code gets for a call it
    makes after the stop, and what the caller of a run that owed a ``finish()`` value
    (``returns``) gets when it stopped before giving one. ``reason`` is why."""

    def __init__(self, reason: str, *, skill: str | None = None, message: str | None = None) -> None:
        self.reason = reason
        super().__init__(message or f"the run was stopped: {reason}", skill=skill)


class ApprovalPending(AgentAppsError):
    """A call from agent code needs a human's approval and nobody can be asked now: the
    run was checkpointed and ended with status ``waiting-approval``. Decide with
    ``agent-apps approve RUN`` (``cm.approve``), then ``agent-apps resume RUN``
    (``cm.resume``). ``pending`` describes the call: skill, args, agent, rule."""

    def __init__(self, run_id: str, pending: dict[str, Any]) -> None:
        import json

        self.run_id = run_id
        self.pending = pending
        args = json.dumps(pending.get("args"), ensure_ascii=False, default=str)
        if len(args) > 300:
            args = args[:299] + "…"
        self.call = f"{pending.get('skill')} {args}"
        super().__init__(f"run {run_id} is waiting for approval of {self.call}", skill=pending.get("skill"))

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "run_id": self.run_id, "pending": self.pending}


class ReplayDiverged(AgentAppsError):
    """A resumed run asked for something other than what its journal holds (the code,
    a skill or the model's inputs changed since): it stopped before executing it."""

    def __init__(self, run_id: str, message: str) -> None:
        self.run_id = run_id
        super().__init__(f"run {run_id} diverged from its journal on resume: {message}")
