"""``agent-apps run PROMPT`` and ``agent-apps chat``: an agent without a skill file, once
or turn by turn in a session (imported only for them).

Both invoke the ``agent`` skill: the prompt is its task (``user_message``), ``--tools``
its ``allowed_tools``, ``--system`` its system prompt, and ``--model`` / ``--config``
the call layer of the cascade, as for ``invoke``. The live view is ``invoke``'s.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, Any

from ..errors import AgentAppsError
from . import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    UsageError,
    _call_options,
    _manager,
    _Parser,
    _report,
    _serve,
    add_call_options,
    add_output_options,
)

if TYPE_CHECKING:
    from . import _Subparsers

#: Words that end a chat, typed alone on a line (as Ctrl-D does).
CHAT_EXIT = ("/exit", "/quit")


def cmd_run(args: argparse.Namespace) -> int:
    prompt = args.prompt
    if prompt in (None, "-"):  # the prompt from stdin: `cat notes.md | agent-apps run -`
        prompt = sys.stdin.read()
    if not prompt.strip():
        raise UsageError("the prompt is empty: agent-apps run \"PROMPT\" (or - to read it from stdin)")
    cm = _manager(args)
    options = _call_options(cm, args)
    call = _agent_call(args, prompt, "run")
    return _serve(cm, args, "run", lambda serving: cm.invoke("agent", call, **serving, **options))


def cmd_chat(args: argparse.Namespace) -> int:
    """Read a message a line, run the agent on it in the session, print its answer; until
    Ctrl-D, ``/exit`` or Ctrl-C at the prompt. Ctrl-C while the agent works cancels that
    turn only. Exit status 0, or 1 when a turn failed (the chat went on)."""
    import asyncio

    cm = _manager(args)
    if args.session is None and not args.read_only:  # a new conversation, named to be taken up again
        args.session = time.strftime("chat-%Y%m%d-%H%M%S")
    options = _call_options(cm, args)
    terminal = sys.stdin.isatty()
    print(
        f"agent-apps chat: session {args.session}; end it with Ctrl-D or /exit, go on with it later with "
        f"agent-apps chat --session {args.session}",
        file=sys.stderr,
    )
    failed = False
    with asyncio.Runner() as runner:  # one event loop for every turn: the sandbox and the store stay open
        while True:
            try:
                line = _read_line(terminal)
            except KeyboardInterrupt:
                print(file=sys.stderr)
                return EXIT_INTERRUPTED
            if line is None or line.strip() in CHAT_EXIT:
                return EXIT_FAILED if failed else EXIT_OK
            if not line.strip():
                continue
            call = _agent_call(args, line, "chat")
            turn_options = dict(options)
            options.pop("attachments", None)  # --attach goes with the first message only
            try:
                status = _serve(
                    cm,
                    args,
                    "chat",
                    lambda serving, call=call, turn_options=turn_options: cm.invoke(
                        "agent", call, **serving, **turn_options
                    ),
                    runner,
                )
            except KeyboardInterrupt:
                print("interrupted: the turn was cancelled; the chat goes on", file=sys.stderr)
                continue
            except AgentAppsError as exc:  # one failed turn: said, and the chat goes on
                status = _report(exc, args)
            failed = failed or status not in (EXIT_OK,)


def _read_line(terminal: bool) -> str | None:
    """The next message, None at the end of the input. On a terminal, with a prompt and
    line editing (and the history of this chat, with the arrow keys)."""
    if terminal:
        import readline  # noqa: F401  (input() edits lines with it, once imported)

        try:
            return input("> ")
        except EOFError:
            print(file=sys.stderr)
            return None
    line = sys.stdin.readline()
    return line.rstrip("\n") if line else None


def _agent_call(args: argparse.Namespace, message: str, name: str) -> dict[str, Any]:
    call: dict[str, Any] = {"user_message": message, "name": name}
    if args.system is not None:
        call["prompt"] = args.system
    if args.tools is not None:
        call["allowed_tools"] = " ".join(spec for spec in args.tools.replace(",", " ").split())
    return call


def _agent_options(p: _Parser) -> None:
    p.add_argument(
        "--tools", metavar="LIST",
        help="the skills the agent may call, comma- or space-separated, with globs (file-list,file-read; "
        "file-*); default: every skill it can see; '' for none",
    )
    p.add_argument("--system", metavar="TEXT", help="the system prompt (default: a short one of agent-apps')")
    add_call_options(p)
    add_output_options(p)


def _run_parser(sub: _Subparsers, common: _Parser) -> None:
    p = sub.add_parser(
        "run", parents=[common], help="run an agent on a prompt, no skill file needed",
        description="Run the agent once on PROMPT (its task) and print its answer; no skill file needed. "
        "Its progress shows on stderr as for invoke.",
    )
    p.add_argument("prompt", metavar="PROMPT", nargs="?", help="the task; - (or nothing) reads it from stdin")
    _agent_options(p)
    p.set_defaults(run=cmd_run)


def _chat_parser(sub: _Subparsers, common: _Parser) -> None:
    p = sub.add_parser(
        "chat", parents=[common], help="talk with an agent, turn by turn, in a session",
        description="An interactive chat: each line you type is a turn of the agent in a session (new, or "
        "--session ID to go on with one), which sees the conversation so far. Ctrl-C cancels the turn in "
        "progress; Ctrl-D or /exit ends the chat.",
    )
    _agent_options(p)
    p.set_defaults(run=cmd_chat)
