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

#: Characters that end a simple command outside quotes (``&`` and ``|`` inside a
#: redirection such as ``2>&1``, ``&>`` or ``>|`` do not).
_SEPARATORS = frozenset(";&|\n()`")
#: Where a command substitution begins: ``$(`` and backticks run inside double quotes
#: too; ``<(`` and ``>(`` do not.
_SUBSTITUTION = ("$(", "`", "<(", ">(")


def simple_commands(line: str, *, substitutions: bool = False) -> list[str] | None:
    """The simple commands of a shell ``line``, cut outside quotes, comments left out;
    None if it substitutes commands, unless ``substitutions``: then the commands a
    substitution runs come out as commands of their own."""
    parts: list[str] = []
    current: list[str] = []
    quote = ""
    word_start = True
    i, size = 0, len(line)
    while i < size:
        char = line[i]
        if quote == "'":
            current.append(char)
            quote = "" if char == "'" else quote
            i += 1
            continue
        if char == "\\":
            current.append(line[i : i + 2])
            i += 2
            word_start = False
            continue
        if line.startswith(_SUBSTITUTION if not quote else _SUBSTITUTION[:2], i):  # a command runs here
            if not substitutions:
                return None
            parts.append("".join(current))
            current, quote, word_start = [], "", True
            i += 1 if char == "`" else 2
            continue
        if quote == '"':
            current.append(char)
            quote = "" if char == '"' else quote
            i += 1
            continue
        if char in "'\"":
            quote = char
        elif char == "#" and word_start:  # a comment, to the end of the line
            end = line.find("\n", i)
            i = size if end < 0 else end
            continue
        elif char == "&" and (line[i - 1 : i] == ">" or line[i + 1 : i + 2] == ">") or line[i - 1 : i + 1] == ">|":
            pass  # part of a redirection: 2>&1, &>, >|
        elif char in _SEPARATORS:
            parts.append("".join(current))
            current, word_start = [], True
            i += 1
            continue
        current.append(char)
        word_start = char in " \t"
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
