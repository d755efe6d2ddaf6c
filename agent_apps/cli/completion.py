"""Shell completion for bash, zsh and fish, through argcomplete (imported only for it).

``agent-apps completion SHELL`` prints the script that hooks the shell up; the shell then
runs ``agent-apps`` itself at each Tab with ``$_ARGCOMPLETE`` set, and :func:`complete`
answers: commands and options from the whole parser, skill names where a command takes
one, run ids and session ids from the state store. A command's ordinary start never
imports argcomplete nor builds the whole parser: :func:`agent_apps.cli.main` comes here
only when ``$_ARGCOMPLETE`` is set.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from . import _GROUPS, EXIT_OK, _Parser, _parser

if TYPE_CHECKING:
    from . import _Subparsers

SHELLS = ("bash", "zsh", "fish")


def complete() -> None:
    """Answer the shell's completion request (argcomplete exits the process)."""
    import argcomplete

    parser, _ = _parser(None)
    subcommands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, (module, _) in _GROUPS.items():  # their real parsers, in place of the listing's stubs
        group = importlib.import_module(module).parser()
        inner = [a for a in group._actions if isinstance(a, argparse._SubParsersAction)]
        found = inner[0].choices.get(name) if inner and name in inner[0].choices else group
        subcommands.choices[name] = found
    for sub in _parsers(parser):
        for action in sub._actions:
            completer = _COMPLETERS.get(action.dest)
            if completer is not None and not action.option_strings:
                action.completer = completer  # type: ignore[attr-defined]
    argcomplete.autocomplete(parser)


def _parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _parsers(sub)


def _skill_names(prefix: str, parsed_args: Any, **_: Any) -> list[str]:
    from ..manager import ContextManager

    cm = ContextManager(search_path=getattr(parsed_args, "path", None) or [])
    return sorted(name for name in cm.catalog.skills if name.startswith(prefix))


def _run_ids(prefix: str, **_: Any) -> list[str]:
    from ..state import open_store

    return [run.id for run in open_store().runs.list(limit=200) if run.id.startswith(prefix)]


def _session_ids(prefix: str, **_: Any) -> list[str]:
    from ..state import open_store

    return [session.id for session in open_store().sessions.list() if session.id.startswith(prefix)]


#: Completers by the ``dest`` of a positional argument.
_COMPLETERS = {"name": _skill_names, "run_id": _run_ids, "id": _session_ids}


def cmd_completion(args: argparse.Namespace) -> int:
    import argcomplete

    print(argcomplete.shellcode(["agent-apps"], shell=args.shell))
    return EXIT_OK


def _completion_parser(sub: _Subparsers, common: _Parser) -> None:
    p = sub.add_parser(
        "completion", parents=[common], help="print the shell's completion script (bash, zsh, fish)",
        description="Print the script that makes SHELL complete agent-apps' commands, options, skill names, "
        "run ids and session ids. Add it to the shell's start-up: bash: eval \"$(agent-apps completion "
        "bash)\" in ~/.bashrc; zsh: the same in ~/.zshrc; fish: agent-apps completion fish > "
        "~/.config/fish/completions/agent-apps.fish.",
    )
    p.add_argument("shell", metavar="SHELL", choices=SHELLS, help="bash, zsh or fish")
    p.set_defaults(run=cmd_completion)
