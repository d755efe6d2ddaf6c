"""Command constraints on ``shell``, held for every command of a shell line.

allowed-tools may constrain the ``shell`` tool's command: ``shell(command="git *")``
(what a SKILL.md's ``Bash(git:*)`` becomes). The pipeline matches that glob against
the whole line, where ``*`` also matches ``git log; rm -rf build``. So the shell tool
checks again: the line is split into its simple commands (on ``;``, ``&``, ``|``,
newlines and parentheses, outside quotes) and each one must be allowed by the caller's
specs on its own. Command substitution (``$(...)``, backticks, ``<(...)``) runs
commands no spec can see, so a constrained caller may not use it.

Unconstrained callers (``shell`` in allowed-tools, no allowed-tools, top-level calls)
are not affected.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import PermissionDenied

if TYPE_CHECKING:
    from ..context import Context

__all__ = ["check_command", "simple_commands"]

_SEPARATORS = frozenset(";&|\n()")
_SUBSTITUTION = ("$(", "`", "<(", ">(")


def simple_commands(line: str) -> list[str] | None:
    """The simple commands of a shell ``line``, or None if it substitutes commands."""
    parts: list[str] = []
    current: list[str] = []
    quote = ""
    i = 0
    while i < len(line):
        char = line[i]
        if quote != "'" and line.startswith(_SUBSTITUTION if not quote else _SUBSTITUTION[:2], i):
            return None  # $(...) and backticks run inside double quotes too; <(...) does not
        if char == "\\" and quote != "'":
            current.append(line[i : i + 2])
            i += 2
            continue
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char in _SEPARATORS:
            parts.append("".join(current))
            current = []
            i += 1
            continue
        current.append(char)
        i += 1
    parts.append("".join(current))
    return [part.strip() for part in parts if part.strip()]


def check_command(ctx: Context, command: str) -> None:
    """Raise :class:`PermissionDenied` unless the caller's allowed-tools allow every
    simple command of ``command`` on its own (see the module docstring)."""
    caller = ctx.parent
    allowed = caller.skill.allowed_tools if caller is not None else None
    if not allowed:
        return
    from ..allowed_tools import parse_specs

    specs = [s for s in parse_specs(allowed) if s.matches_name(ctx.skill)]
    args: dict[str, Any] = dict(ctx.args)
    if any(s.args_problem({**args, "command": "\x00any"}) is None for s in specs):
        return  # a spec that does not constrain the command
    commands = simple_commands(command)
    rule = f"allowed-tools of {caller.skill.name}: {allowed}"  # type: ignore[union-attr]
    if commands is None:
        raise PermissionDenied(
            "shell",
            "command substitution ($(...), backticks) is refused under a command constraint",
            rule=rule,
            resource=command,
        )
    for part in commands:
        if not any(s.args_problem({**args, "command": part}) is None for s in specs):
            raise PermissionDenied(
                "shell",
                f"{part!r} (a command of the line) is not allowed by the command constraint",
                rule=rule,
                resource=command,
            )
