"""Destructive shell lines: the ones that raise a ``shell`` call to the ``admin`` category.

The ``shell`` skill is a ``write`` tool, so the policy lets it run where writes may run
(interactive: allow). Some lines destroy what cannot be had back: they make the call an
``admin`` one, which the policy asks a human about (interactive) or refuses
(unattended), as seed 002 has it (``bash`` destructive: admin). A skill opts in with
``metadata.shell_arg``, the name of its arg that holds a shell line (docs/security.md).

:func:`destructive` says why a line is destructive, or None. The line is cut into
simple commands outside quotes (on ``;``, ``&``, ``&&``, ``|``, ``||``, newlines,
parentheses, ``$(`` and backticks; comments dropped: commands.py), each command is split into words
with :mod:`shlex` (quotes and escapes as the shell reads them), its redirections taken
out, and the wrappers before the program skipped (assignments ``X=1``, ``env``,
``nohup``, ``time``, ``nice``, ``timeout``, ``xargs``, ``sudo``, ...); ``sh -c``,
``bash -c`` and ``eval`` are read again as lines, ``find -exec`` as a command. A
command is destructive when it:

* removes files: ``rm`` (with an operand), ``unlink``, ``shred``, ``find -delete``;
* rewrites what git cannot give back: ``git push --force`` (``-f``,
  ``--force-with-lease``, a ``+refspec``), ``reset --hard``, ``clean -f``,
  ``branch -D``, ``checkout --`` or ``checkout .``, ``restore`` of the working tree,
  ``stash drop``/``clear``;
* writes a disk or a filesystem: ``dd of=...``, ``mkfs``, ``mkfs.*``, ``mke2fs``,
  ``mkswap``;
* changes permissions or owners recursively: ``chmod -R``, ``chown -R``, ``chgrp -R``;
* cuts a file: ``truncate``;
* overwrites an existing file: ``>``, ``>|`` and ``&>`` redirections onto it, ``tee``
  without ``-a``, ``cp`` or ``mv`` onto it (a target that names a variable cannot be
  told: it does not count).

What the shell blocklist refuses outright (blocklist.py) is left to it. Like the
blocklist, this reads the line as written: code that builds a command at run time
(``eval "$(echo ... | base64 -d)"``) is not seen through. It is there so the policy can
ask, not what makes ``shell`` safe to allow.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import PurePath

from .commands import simple_commands

__all__ = ["destructive"]

#: Programs that run the rest of their words as a command, and their options that
#: take a value (skipped with it).
_WRAPPERS: dict[str, frozenset[str]] = {
    "env": frozenset({"-u", "--unset", "-C", "--chdir", "-S"}),
    "nohup": frozenset(),
    "time": frozenset({"-f", "--format", "-o", "--output"}),
    "command": frozenset(),
    "exec": frozenset({"-a"}),
    "builtin": frozenset(),
    "nice": frozenset({"-n", "--adjustment"}),
    "ionice": frozenset({"-c", "--class", "-n", "--classdata", "-p", "-P", "-u"}),
    "stdbuf": frozenset({"-i", "-o", "-e"}),
    "timeout": frozenset({"-s", "--signal", "-k", "--kill-after"}),
    "xargs": frozenset({"-a", "-d", "-E", "-e", "-I", "-i", "-L", "-l", "-n", "-P", "-s", "--arg-file", "--delimiter",
                        "--max-args", "--max-procs", "--max-chars", "--max-lines"}),  # fmt: skip
    "sudo": frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U"}),
    "doas": frozenset({"-u", "-C"}),
}
#: Wrappers whose first operand is theirs, not the command's (``timeout 5 rm x``).
_WRAPPER_OPERAND = frozenset({"timeout"})
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh"})
_MKFS = frozenset({"mkfs", "mke2fs", "mkswap", "mkdosfs", "mkntfs"})
_GIT_GLOBAL_VALUES = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace"})
#: Redirections that replace a file's contents (``>>`` appends, ``<`` reads).
_OVERWRITE = frozenset({">", ">|", "&>", ">&"})
_REDIRECTIONS = _OVERWRITE | {">>", "&>>", "<", "<<", "<<<", "<>"}


def destructive(line: str, exists: Callable[[str], bool] = lambda path: False) -> str | None:
    """Why the shell ``line`` is destructive (see the module docstring), and which of
    its commands is, or None. ``exists(path)`` says whether a file it would overwrite
    is there."""
    found = _first(line, exists, 0)
    return None if found is None else f"{found[0]}: {found[1]}"


def _first(line: str, exists: Callable[[str], bool], depth: int) -> tuple[str, str] | None:
    """The first destructive command of ``line``: why, and the command."""
    if depth > 3:  # sh -c "sh -c '...'": deep enough to stop looking
        return None
    for command in simple_commands(line, substitutions=True) or ():
        why = _command(_words(command), exists, depth)
        if why is not None:
            return why, command.strip()
    return None


def _nested(line: str, exists: Callable[[str], bool], depth: int) -> str | None:
    """Why a line run by a command (``sh -c LINE``, ``eval``) is destructive, or None."""
    found = _first(line, exists, depth + 1)
    return None if found is None else found[0]


def _words(command: str) -> list[str]:
    """The words of one simple command, redirection operators as words of their own."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars="<>&|")
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError:  # unbalanced quotes: the shell would refuse it; read it plainly
        return command.split()


def _command(words: list[str], exists: Callable[[str], bool], depth: int) -> str | None:
    """Why one simple command (its words) is destructive, or None."""
    words, overwritten = _redirections(words)
    for target in overwritten:
        if _names_file(target) and exists(target):
            return f"overwrites the existing file {target!r}"
    words, fed = _unwrapped(words)
    if not words:
        return None
    program, args = PurePath(words[0]).name, words[1:]
    if program in _SHELLS and "-c" in args[:-1]:
        return _nested(args[args.index("-c") + 1], exists, depth)
    if program == "eval":
        return _nested(" ".join(args), exists, depth)
    return _program(program, args, fed, exists, depth)


def _program(program: str, args: list[str], fed: bool, exists: Callable[[str], bool], depth: int) -> str | None:
    """Why ``program args`` is destructive; ``fed``: ``xargs`` adds operands to it."""
    flags, operands = _split(args)
    if program == "rm" and (operands or fed):
        return "'rm' removes files"
    if program in ("unlink", "shred"):
        return f"'{program}' removes files"
    if program == "find":
        return _find(args, exists, depth)
    if program == "git":
        return _git(args)
    if program == "dd" and any(a.startswith("of=") for a in args):
        return "'dd of=' overwrites its output"
    if program in _MKFS or program.startswith("mkfs."):
        return f"'{program}' formats a filesystem"
    if program in ("chmod", "chown", "chgrp") and ("R" in flags or "--recursive" in args):
        return f"recursive '{program}'"
    if program == "truncate":
        return "'truncate' cuts files"
    if program == "tee" and not ({"a"} & flags or "--append" in args):
        hit = [f for f in operands if _names_file(f) and exists(f)]
        if hit:
            return f"'tee' overwrites the existing file {hit[0]!r}"
    if program in ("cp", "mv") and len(operands) >= 2 and not ({"n"} & flags or "--no-clobber" in args):
        target = operands[-1]
        if _names_file(target) and exists(target):
            return f"'{program}' overwrites the existing file {target!r}"
    return None


def _find(args: list[str], exists: Callable[[str], bool], depth: int) -> str | None:
    if "-delete" in args:
        return "'find -delete' removes files"
    for index, arg in enumerate(args):
        if arg in ("-exec", "-execdir", "-ok", "-okdir"):
            rest = args[index + 1 :]
            end = next((i for i, a in enumerate(rest) if a in (";", "+")), len(rest))
            why = _command(rest[:end], exists, depth + 1)
            if why is not None:
                return f"'find {arg}' runs a destructive command ({why})"
    return None


def _git(args: list[str]) -> str | None:
    """Git commands that throw away what cannot be had back."""
    index = 0
    while index < len(args) and args[index].startswith("-"):  # global options, some with a value
        index += 2 if args[index] in _GIT_GLOBAL_VALUES else 1
    if index >= len(args):
        return None
    sub, rest = args[index], args[index + 1 :]
    flags, operands = _split(rest)
    if sub == "push" and ({"f"} & flags or any(a.startswith(("--force", "--mirror")) for a in rest)
                          or any(o.startswith("+") for o in operands)):  # fmt: skip
        return "'git push --force' rewrites the remote's history"
    if sub == "reset" and "--hard" in rest:
        return "'git reset --hard' throws away changes"
    if sub == "clean" and ({"f"} & flags or "--force" in rest) and not ({"n"} & flags or "--dry-run" in rest):
        return "'git clean -f' removes untracked files"
    forced = bool({"f"} & flags) or "--force" in rest
    if sub == "branch" and ("D" in flags or forced and ({"d"} & flags or "--delete" in rest)):
        return "'git branch -D' deletes a branch"
    if sub == "checkout" and ("--" in rest or "." in operands):
        return "'git checkout --' throws away changes"
    if sub == "restore" and ("--staged" not in rest or "--worktree" in rest or "W" in flags):
        return "'git restore' throws away changes"
    if sub == "stash" and operands[:1] in (["drop"], ["clear"]):
        return f"'git stash {operands[0]}' throws away stashed changes"
    return None


def _redirections(words: list[str]) -> tuple[list[str], list[str]]:
    """The words without redirections, and the files redirected onto (overwritten)."""
    kept: list[str] = []
    overwritten: list[str] = []
    index = 0
    while index < len(words):
        word = words[index]
        if word in _REDIRECTIONS:
            target = words[index + 1] if index + 1 < len(words) else ""
            if word in _OVERWRITE and not (word == ">&" and target.isdigit() or target == "-"):
                overwritten.append(target)
            if kept and kept[-1].isdigit():  # 2> file: the descriptor is no word of the command
                kept.pop()
            index += 2
            continue
        kept.append(word)
        index += 1
    return kept, overwritten


def _unwrapped(words: list[str]) -> tuple[list[str], bool]:
    """The command after its assignments and wrappers (``X=1 nice -n 5 rm x``: rm x),
    and whether ``xargs`` runs it (with operands of its own)."""
    index, fed = 0, False
    while index < len(words):
        word = words[index]
        if "=" in word and not word.startswith("=") and word.split("=", 1)[0].isidentifier():
            index += 1
            continue
        name = PurePath(word).name
        takes = _WRAPPERS.get(name)
        if takes is None:
            break
        index += 1
        fed = fed or name == "xargs"
        while index < len(words) and words[index].startswith("-") and words[index] != "-":
            index += 2 if words[index] in takes else 1
        if name in _WRAPPER_OPERAND and index < len(words):
            index += 1
    return words[index:], fed


def _split(args: list[str]) -> tuple[set[str], list[str]]:
    """Short flags (``-rf``: r, f) and operands (after ``--`` everything is one)."""
    flags: set[str] = set()
    operands: list[str] = []
    for index, arg in enumerate(args):
        if arg == "--":
            operands += args[index + 1 :]
            break
        if arg.startswith("-") and not arg.startswith("--") and len(arg) > 1:
            flags.update(arg[1:])
        elif not arg.startswith("-"):
            operands.append(arg)
    return flags, operands


def _names_file(target: str) -> bool:
    """Whether a redirection or operand target is a file path that can be checked
    (not a variable, not a device such as /dev/null)."""
    return bool(target) and "$" not in target and not target.startswith("/dev/")
