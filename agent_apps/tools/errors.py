"""The errors the security layers raise: :class:`PermissionDenied` and, when a human
chose to skip a host call from agent code or to answer it, :class:`CallSkipped` and
:class:`CallAnswered`.

It is a call error (exit status 2 on the command line, like ``ToolNotAllowed``): the
call was refused before it could do anything, so the agent can change course (pick
another path, ask for approval, give up) rather than retry blindly.
"""

from __future__ import annotations

from typing import Any

from ..errors import AgentAppsError

__all__ = ["CallAnswered", "CallSkipped", "PermissionDenied"]


class PermissionDenied(AgentAppsError):
    """A path boundary, the shell blocklist, the network rules or the permission
    policy refused a call.

    ``rule`` names the config key (or built-in rule) that decided, so the message tells
    a user exactly what to change; ``resource`` is the path, command or URL refused.
    """

    call_error = True

    def __init__(self, skill: str, reason: str, *, rule: str | None = None, resource: str | None = None) -> None:
        self.reason = reason
        self.rule = rule
        self.resource = resource
        where = f" ({rule})" if rule else ""
        super().__init__(f"{skill}: permission denied: {reason}{where}", skill=skill)

    def to_json(self) -> dict[str, Any]:
        data = super().to_json()
        if self.rule:
            data["rule"] = self.rule
        if self.resource:
            data["resource"] = self.resource
        return data


class CallSkipped(AgentAppsError):
    """The approver chose to skip the call: it was not made. The agent policy turns it
    into ``None`` for the agent code and a note for the model."""

    def __init__(self, skill: str, rule: str | None = None) -> None:
        self.rule = rule
        super().__init__(f"{skill}: skipped by the approver", skill=skill)


class CallAnswered(AgentAppsError):
    """The approver supplied the call's result: it was not made. The permission
    middleware returns :attr:`result` as the call's result (checked against the
    skill's ``returns`` like any result)."""

    def __init__(self, skill: str, result: Any, rule: str | None = None) -> None:
        self.result = result
        self.rule = rule
        super().__init__(f"{skill}: answered by the approver", skill=skill)
