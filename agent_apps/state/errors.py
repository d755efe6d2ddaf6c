"""Errors of the state store. All are :class:`~agent_apps.errors.AgentAppsError`."""

from __future__ import annotations

from ..errors import AgentAppsError

__all__ = ["AlreadyExists", "NotFound", "NotResumable", "SnapshotInvalid", "StateError"]


class StateError(AgentAppsError):
    """The state store cannot be used: a corrupt file, a newer schema, a locked or
    unwritable database. ``path`` names the database file."""

    def __init__(self, message: str, *, path: str) -> None:
        self.path = path
        super().__init__(f"state store {path}: {message}")
        self.reason = message


class _IdError(AgentAppsError):
    """An error about one session or run, named by kind and id."""

    call_error = True
    template = "{kind} {ident!r}"

    def __init__(self, kind: str, ident: str, hint: str = "") -> None:
        self.kind = kind
        self.ident = ident
        super().__init__(self.template.format(kind=kind, ident=ident) + (f" ({hint})" if hint else ""))


class NotFound(_IdError):
    """No session or run of that id."""

    template = "no {kind} {ident!r}"


class AlreadyExists(_IdError):
    """A session of that id exists already (import, fork)."""

    template = "{kind} {ident!r} already exists"


class NotResumable(_IdError):
    """A run that ``resume`` or ``approve`` cannot take up: it ended, it still runs, it
    waits for a decision, it waits for none, it has no journal. ``why`` says which."""

    def __init__(self, kind: str, ident: str, why: str) -> None:
        self.why = why
        AgentAppsError.__init__(self, f"{kind} {ident} {why}")
        self.kind = kind
        self.ident = ident


class SnapshotInvalid(AgentAppsError):
    """An export file that cannot be imported; names the file, line and field."""

    call_error = True

    def __init__(self, problem: str, *, source: str, line: int | None = None, field: str | None = None) -> None:
        self.source = source
        self.line = line
        self.field = field
        where = f"{source}:{line}" if line else source
        super().__init__(f"{where}: {field + ': ' if field else ''}{problem}")
        self.problem = problem
