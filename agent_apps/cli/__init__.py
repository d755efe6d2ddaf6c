"""The ``agent-apps`` command (CONTRACT section 5).

Exit status: 0 done; 1 the skill failed (``list``: some files failed to load); 2 the
call was wrong (unknown skill, invalid args, not allowed, bad command line); 3 the run
waits for approval (``approve`` and ``resume`` continue it); 130 interrupted; 141 the
reader of stdout went away (``agent-apps list | head``). Errors go to stderr in one or
two plain lines, each starting ``error:``; ``--debug`` adds the traceback.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import math
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

from ..errors import AgentAppsError
from ..terminal import json_line, printable

__all__ = ["main"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_APPROVAL, EXIT_INTERRUPTED, EXIT_PIPE = 0, 1, 2, 3, 130, 141

#: Command groups that live in modules of their own, imported only when used.
_GROUPS = {
    "sessions": ("agent_apps.cli.state", "list, show, export, import, fork and remove sessions"),
    "runs": ("agent_apps.cli.state", "list, show, stop, export and import recorded agent runs"),
    "state": ("agent_apps.cli.state", "copy a whole state store, between SQLite and PostgreSQL"),
    "scheduler": ("agent_apps.cli.scheduler", "run due schedules in the foreground until Ctrl-C"),
    "batch": ("agent_apps.cli.batch", "run a skill once per line of a JSONL file, locally or on a Ray cluster"),
    "console": ("agent_apps.console.cli", "a local web page over the state store: runs, approvals, sessions"),
}


class UsageError(Exception):
    """A bad command line (exit status 2)."""


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors in the same ``error: ...`` style as every other error."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"error: {message}\n")


if TYPE_CHECKING:
    _Subparsers = argparse._SubParsersAction[_Parser]


#: Whether :func:`main` holds the garbage collector paused (the command is starting).
_gc_paused = False


def main(argv: Sequence[str] | None = None) -> int:
    global _gc_paused
    if argv is None and "_ARGCOMPLETE" in os.environ:  # the shell asks for completions (Tab)
        importlib.import_module("agent_apps.cli.completion").complete()  # as every command's module
    if argv is not None or not gc.isenabled():  # a caller's own process (a test): its collector as it is
        return _main(list(sys.argv[1:] if argv is None else argv))
    gc.disable()  # until the start is over: see _start_done()
    _gc_paused = True
    try:
        return _main(sys.argv[1:])
    finally:
        _start_done()


def _start_done() -> None:
    """The command's start is over: the garbage collector, paused by :func:`main`, runs
    again, and never again looks at what the start built.

    The start (imports, the parser, the catalog) makes tens of thousands of objects that
    live until the process ends and almost no garbage, so collecting during it finds
    nothing; freezing them (:func:`gc.freeze`) also spares every later collection,
    including the two at the process's exit, from walking them: together about a tenth
    of a short command's time. Called where a command starts running something (a skill,
    a server, a command group, the sandbox's build), and when it returns.
    """
    global _gc_paused
    if _gc_paused:
        _gc_paused = False
        gc.freeze()
        gc.enable()


def _main(argv: list[str]) -> int:
    args = _parse(argv)
    if not getattr(args, "command", None):
        _parser()[0].print_help(sys.stderr)
        return EXIT_USAGE
    if getattr(args, "debug", False):
        os.environ.setdefault("AGENT_APPS_DEBUG", "1")  # mounted MCP servers' stderr to the terminal
    try:
        return int(args.run(args) or EXIT_OK)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return _stdout_closed()
    except UsageError as exc:
        print(f"error: {printable(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    except AgentAppsError as exc:
        return _report(exc, args)
    except Exception as exc:  # a bug of ours: still one clear line unless --debug
        if args.debug:
            raise
        print(
            f"error: internal error: {type(exc).__name__}: {printable(str(exc))} (run with --debug for details)",
            file=sys.stderr,
        )
        return EXIT_FAILED


def _stdout_closed() -> int:
    """The reader of stdout went away (``| head``): end quietly, as ``ls | head`` does.

    stdout is pointed at /dev/null so that the flush at exit does not fail again.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return EXIT_PIPE


def _parse(argv: list[str]) -> argparse.Namespace:
    """Options may come anywhere (``invoke NAME --path DIR key=value``): argparse
    only allows that per subcommand, with ``parse_intermixed_args``."""
    if argv and argv[0] in _GROUPS:
        _start_done()  # the group's commands run their own start (the scheduler runs until stopped)
        return importlib.import_module(_GROUPS[argv[0]][0]).parse(argv)  # type: ignore[no-any-return]
    parser, commands = _parser(argv[0] if argv else None)
    sub = commands.get(argv[0]) if argv else None
    if sub is None:
        return parser.parse_args(argv)
    args = sub.parse_intermixed_args(argv[1:])
    args.command = argv[0]
    return args


def _report(exc: AgentAppsError, args: argparse.Namespace) -> int:
    if args.debug:
        import traceback

        traceback.print_exception(exc, file=sys.stderr)
    print(f"error: {printable(str(exc))}", file=sys.stderr)
    cause = exc.__cause__
    if cause is not None and not args.debug:
        where = _innermost_frame(cause)
        if where:
            print(f"  at {where} (run with --debug for the traceback)", file=sys.stderr)
    return EXIT_USAGE if exc.call_error and not exc.depth else EXIT_FAILED


def _innermost_frame(exc: BaseException) -> str | None:
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else None


# -- commands ------------------------------------------------------------------------


def _manager(args: argparse.Namespace) -> Any:
    from ..manager import ContextManager

    for path in args.path:
        if not os.path.isdir(path):
            print(f"warning: --path {path}: no such directory", file=sys.stderr)
    return ContextManager(search_path=args.path)


def _skill(cm: Any, ref: str) -> Any:
    """The skill a command line names: a name on the search path, or a path to a skill file."""
    return cm.get(ref) if _is_name(ref) else cm._resolve(ref, None)


def cmd_invoke(args: argparse.Namespace) -> int:
    cm = _manager(args)
    skill = _skill(cm, args.name)
    call_args = _call_args(args, skill.params)
    options = _call_options(cm, args)
    return _serve(cm, args, skill.name, lambda serving: cm.invoke(skill, call_args, **serving, **options))


def tenant_option(tenant: str) -> str:
    """``--tenant ID``, refused (exit 2) unless it is a tenant id a run can keep."""
    from ..run_record import id_problem

    problem = id_problem(tenant, "tenant id")
    if problem:
        raise UsageError(f"--tenant: {problem}")
    return tenant


def _call_options(cm: Any, args: argparse.Namespace) -> dict[str, Any]:
    """The invocation's options from ``--session``, ``--read-only``, ``--tenant``, ``--timeout``,
    ``--context``, ``--model``, ``--config`` (the call layer of the cascade: it wins over
    every config file and the skill's metadata, as ``invoke(..., config=...)`` does in
    Python) and ``--attach`` (each file read and checked now, so a bad one is refused
    before anything runs)."""
    options: dict[str, Any] = {}
    if args.attach:
        from ..attachments import AttachmentInvalid, load

        try:
            options["attachments"] = load(args.attach, cwd=cm.cwd)
        except AttachmentInvalid as exc:
            shown = args.attach[exc.index] if exc.index is not None else " ".join(args.attach)
            raise UsageError(f"--attach {shown}: {exc.problem}") from None
    if args.session:
        from ..state import session_id_problem

        problem = session_id_problem(args.session)
        if problem:
            raise UsageError(f"--session: {problem}")
        if args.read_only and not cm.state.sessions.exists(args.session):
            raise UsageError(
                f"--session {args.session}: no such session, and a read-only run makes none "
                "(agent-apps sessions list shows the sessions)"
            )
        options["session"] = args.session
    if args.read_only:
        if not args.session:
            raise UsageError("--read-only applies to a session: give --session ID too")
        options["read_only"] = True
    if args.tenant is not None:
        options["tenant"] = tenant_option(args.tenant)
    if args.timeout is not None:
        options["timeout"] = args.timeout
    if args.context is not None:
        options["context"] = _text_or_file(args.context, "--context")
    config: dict[str, Any] = {}
    for pair in args.config:
        layer = _config_pair(cm, pair)
        _merge(config, layer)
    if args.model is not None:
        _merge(config, {"model": {"model_id": args.model}})
    if config:
        options["config"] = config
    return options


def _config_pair(cm: Any, pair: str) -> dict[str, Any]:
    """One ``--config KEY=VALUE`` (or ``KEY:=JSON``) as a config layer, checked on its own
    so that an error names the pair. VALUE is typed by the key: kept as text for a string
    key, else read as JSON when it is JSON (``model.max_turns=5``, ``model.persistent=true``)."""
    from ..config import expected_type
    from ..errors import ConfigError

    key, sep, text = pair.partition("=")
    as_json = key.endswith(":")
    key = key.removesuffix(":")
    parts = tuple(key.split("."))
    if not sep or not all(parts):
        raise UsageError(f"--config {pair!r} is not KEY=VALUE or KEY:=JSON (KEY dotted: model.max_turns)")
    keys = cm.config_keys() or {}
    value: Any = text
    if as_json or not str(expected_type(keys, parts) or "").startswith("a string"):
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            if as_json:
                raise UsageError(f"--config {pair}: not valid JSON: {exc.msg}") from None
    layer: dict[str, Any] = {}
    node = layer
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value
    try:
        cm.check_call_config(layer)
    except ConfigError as exc:
        problem = str(exc).removeprefix("the call's config: ")
        raise UsageError(f"--config {pair}: {problem}") from None
    return layer


def _merge(into: dict[str, Any], layer: dict[str, Any]) -> None:
    for key, value in layer.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def cmd_approve(args: argparse.Namespace) -> int:
    """Record the decision on the call a run waits for (docs/durability.md)."""
    from ..state import open_store

    store = open_store()
    run = store.runs.get(args.run_id)
    result = None
    if args.result is not None:
        try:
            result = json.loads(args.result)
        except json.JSONDecodeError as exc:
            raise UsageError(f"--result is not valid JSON: {exc}") from None
    action = "approve" if args.deny is None else "deny"
    action = "skip" if args.skip else "result" if args.result is not None else action
    point = store.journal.decide(run.id, action, args.deny, result=result)
    pending = point.pending or {}
    what = {"approve": "approved", "deny": "denied", "skip": "skipped", "result": "answered"}[action]
    reason = f" ({args.deny})" if args.deny else f" with {_short_json(result)}" if action == "result" else ""
    call = f"{pending.get('skill')} {_short_json(pending.get('args'))}"
    print(printable(f"{what} {call}{reason} for run {run.id}; continue it with: agent-apps resume {run.id}"))
    return EXIT_OK


def cmd_resume(args: argparse.Namespace) -> int:
    """Continue a durable run: after a decision, a crash, an error (docs/durability.md)."""
    cm = _manager(args)
    run = cm.state.runs.get(args.run_id)
    point = cm.state.journal.checkpoint(run.id)
    invocation = point.invocation if point is not None and not point.invocation.get("imported") else {}
    recorded = [p for p in invocation.get("path") or () if os.path.isdir(p)]  # never an imported file's
    cwd = invocation.get("cwd")
    if recorded or (cwd and os.path.isdir(cwd) and os.path.realpath(cwd) != os.path.realpath(cm.cwd)):
        # where the run found its skills the first time, whatever the current directory
        from ..manager import ContextManager

        cwd = cwd if cwd and os.path.isdir(cwd) else None
        cm = ContextManager(search_path=[*recorded, *args.path], cwd=cwd, state=cm.state)
    name = str(invocation.get("name") or run.name)
    return _serve(cm, args, name, lambda options: cm.resume(run.id, **options))


def _serve(cm: Any, args: argparse.Namespace, name: str, start: Any, runner: Any = None) -> int:
    """Run ``start(options)`` (an invocation) with progress on stderr; print its result.

    ``runner`` (an :class:`asyncio.Runner`) runs it on an event loop that outlives it (a
    chat's turns share one); without, on a loop of its own.
    """
    import asyncio

    from ..errors import ApprovalPending
    from ..middleware import served_agent
    from ..progress import JsonLines, ProgressPrinter

    topic = f"cli.{cm.id}"
    if args.events:
        cm.events.subscribe(topic, JsonLines(sys.stderr), id=topic)
    elif not args.quiet:
        cm.events.subscribe(topic, ProgressPrinter(sys.stderr, verbose=args.verbose), id=topic)
    served: dict[str, Any] = {}

    async def run() -> Any:
        try:
            return await start({"nonlocals": {"agent": {"events": topic}}, "middleware": [served_agent(served)]})
        finally:
            await cm.events.drain()

    from ..tracing import configure_from_env

    configure_from_env()  # OTEL_TRACES_EXPORTER / OTEL_EXPORTER_OTLP_ENDPOINT: spans of the run
    _start_done()
    try:
        result = runner.run(run()) if runner is not None else asyncio.run(run())
    except ApprovalPending as exc:  # checkpointed: one line says what waits, and how to go on
        print(
            f"agent-apps: run {exc.run_id} is waiting for approval of {printable(exc.call)}; decide with: "
            f"agent-apps approve {exc.run_id} [--deny REASON | --skip], then: agent-apps resume {exc.run_id}",
            file=sys.stderr,
        )
        return EXIT_APPROVAL
    _print_result(result, as_json=args.json, out=sys.stdout)
    status = served.get("status")
    if status not in (None, "done"):  # a graceful stop (max_turns, max_steps, stopped): partial work
        counts = f"{_count(served.get('turns') or 0, 'turn')}, {_count(served.get('steps') or 0, 'step')}"
        why = "" if status == "stopped" else f"; model.{status} sets the limit"
        print(
            f"error: {name}: {served.get('message') or status} ({counts}{why}); the partial result is on stdout",
            file=sys.stderr,
        )
        return EXIT_FAILED
    return EXIT_OK


def _text_or_file(value: str, option: str) -> str:
    """An option's text, or the contents of the file it names as ``@FILE``."""
    if not value.startswith("@"):
        return value
    try:
        with open(value[1:], encoding="utf-8") as fh:
            return fh.read()
    except OSError as exc:
        raise UsageError(f"{option} {value}: {exc.strerror}") from None


def _number(cast: type, least: float, *, above: bool = False) -> Callable[[str], Any]:
    """An argparse type: a finite number of ``cast`` at least (or above) ``least``."""
    what = "a number of seconds" if cast is float else "a whole number"

    def parse(text: str) -> Any:
        try:
            value = cast(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {what}: {text!r}") from None
        if not math.isfinite(value) or value < least or (above and value == least):
            raise argparse.ArgumentTypeError(f"must be {'greater than' if above else 'at least'} {least:g}, not {text}")
        return value

    return parse


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, not {text!r}")
    return value


# -- helpers -------------------------------------------------------------------------


def _is_name(ref: str) -> bool:
    from ..skill import is_skill_name

    return is_skill_name(ref)


def _call_args(args: argparse.Namespace, params: dict[str, Any] | None) -> dict[str, Any]:
    from ..validation import coerce_params

    call: dict[str, Any] = {}
    if args.args is not None:
        text = sys.stdin.read() if args.args == "@-" else _text_or_file(args.args, "--args")  # @-: piped args
        try:
            loaded = json.loads(text)
        except json.JSONDecodeError as exc:
            source = " (stdin)" if args.args == "@-" else f" ({args.args[1:]})" if args.args.startswith("@") else ""
            raise UsageError(f"--args{source} is not valid JSON: {exc}") from None
        if not isinstance(loaded, dict):
            raise UsageError(f"--args must be a JSON object, not {type(loaded).__name__}")
        call.update(loaded)
    plain: list[tuple[str, str]] = []
    for pair in args.pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"argument {pair!r} is not KEY=VALUE or KEY:=JSON")
        if key.endswith(":"):
            try:
                call[key[:-1]] = json.loads(value)
            except json.JSONDecodeError as exc:
                raise UsageError(f"{key[:-1]}:= value is not valid JSON: {exc.msg}") from None
        else:
            plain.append((key, value))
    call.update(coerce_params(params, plain))
    return call


def _print_result(result: Any, *, as_json: bool, out: TextIO) -> None:
    """The result on stdout: a string as is (escaped on a terminal, exact in a pipe),
    anything else as JSON (terminal-steering characters as ``\\u`` escapes)."""
    if isinstance(result, str) and not as_json:
        print(printable(result) if out.isatty() else result, file=out)
    elif result is not None or as_json:
        print(json_line(result, indent=2), file=out)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _short_json(value: Any, limit: int = 200) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _table(rows: list[tuple[str, ...]], out: TextIO) -> None:
    if not rows:
        return
    rows = [tuple(printable(cell) for cell in row) for row in rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    bold = out.isatty() and not os.environ.get("NO_COLOR")
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)] + [row[-1]]
        if bold:
            cells[0] = f"\033[1m{cells[0]}\033[0m"
        print("  ".join(cells).rstrip(), file=out)


def _parser(command: str | None = None) -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The parser, and the subcommands whose options may be intermixed with positionals.

    Given the ``command`` a command line names, only that subcommand is built: building
    every one (their arguments and help texts, each through argparse's formatter) costs
    a command's start about 5 ms, and only ``--help`` and a command line that names no
    command, or a wrong one, need them all.
    """
    common = _Parser(add_help=False)
    common.add_argument(
        "--path", action="append", default=[], metavar="DIR", help="add DIR to the search path (repeatable)"
    )
    common.add_argument("--debug", action="store_true", help="show tracebacks")

    from .. import __version__

    parser = _Parser(prog="agent-apps", description="Run and inspect skills.")
    parser.add_argument("--version", action="version", version=f"agent-apps {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    only = command if command in _COMMANDS else None
    for name, where in _COMMANDS.items():
        if only in (None, name):
            module, _, function = where.partition(":")
            getattr(importlib.import_module(module), function)(sub, common)
    if only is None:
        for name, (_, text) in _GROUPS.items():  # listed in --help; parsed by their own module
            sub.add_parser(name, help=text, add_help=False)
    intermixed = ("invoke", "run", "list", "describe", "config", "resume")
    return parser, {name: sub.choices[name] for name in intermixed if name in sub.choices}


def _invoke_parser(sub: _Subparsers, common: _Parser) -> None:
    p = sub.add_parser(
        "invoke", parents=[common], help="invoke a skill and print its result",
        description="Invoke a skill (a name on the search path, or a skill file) with args, and print its "
        "result on stdout; an agent's live progress goes to stderr.",
    )
    p.add_argument("name", metavar="NAME", help="a skill name, or a path to a skill file")
    p.add_argument(
        "pairs", nargs="*", default=[], metavar="KEY=VALUE|KEY:=JSON", help="args (VALUE typed by the params schema)"
    )
    p.add_argument("--args", metavar="JSON|@FILE|@-", help="args as a JSON object, @file.json, or @- (stdin)")
    add_call_options(p)
    add_output_options(p)
    p.set_defaults(run=cmd_invoke)


def add_call_options(p: _Parser) -> None:
    """``--model``, ``--config``, ``--session``, ``--read-only``, ``--tenant``, ``--timeout``,
    ``--attach`` and ``--context``: what sets up a call (invoke, run, chat)."""
    p.add_argument("--model", metavar="ID", help="the model to use (model.model_id, above the skill's own)")
    p.add_argument(
        "--config", action="append", default=[], metavar="KEY=VALUE",
        help="a config value for this call, above every config file and the skill's metadata "
        "(repeatable; KEY dotted: model.max_turns=5; KEY:=JSON for any JSON)",
    )
    p.add_argument("--session", metavar="ID", help="continue (or start) this session: the agent sees its history")
    p.add_argument(
        "--read-only", action="store_true", help="off the record: the agent sees the session's history and "
        "writes nothing to it"
    )
    p.add_argument("--tenant", metavar="ID", help="the tenant the run serves (ctx.run.tenant_id; runs list --tenant)")
    p.add_argument(
        "--attach", action="append", default=[], metavar="FILE",
        help="an image (png, jpeg, gif, webp) or a document (pdf, txt, md) for the agent's user message "
        "(repeatable; chat: with the first message)",
    )
    p.add_argument(
        "--timeout", type=_seconds, metavar="SECONDS", help="cancel the whole run (agents, sandboxes, subprocesses) "
        "after this long"
    )
    p.add_argument(
        "--context", metavar="TEXT|@FILE", help="per-task context for the agent: a dynamic layer of its system prompt "
        "(chat: for every turn)"
    )


def add_output_options(p: _Parser) -> None:
    """``--json``, ``--events``, ``-q`` and ``-v``: how a run shows (invoke, resume, run, chat)."""
    p.add_argument("--json", action="store_true", help="print the result as JSON even when it is a string")
    shown = p.add_mutually_exclusive_group()
    shown.add_argument("--events", action="store_true", help="write agent events to stderr as JSON lines")
    shown.add_argument("-q", "--quiet", action="store_true", help="no live progress: the result and errors only")
    shown.add_argument("-v", "--verbose", action="store_true", help="live progress with code and results uncut")


def _approve_parser(sub: _Subparsers, common: _Parser) -> None:
    p = sub.add_parser("approve", parents=[common], help="decide on the call a run waits for (then: resume)")
    p.add_argument("run_id", metavar="RUN", help="a run id, or a unique prefix of one")
    decision = p.add_mutually_exclusive_group()
    decision.add_argument("--deny", metavar="REASON", help="refuse the call; the agent's code gets REASON")
    decision.add_argument("--skip", action="store_true", help="do not make the call; the code gets None")
    decision.add_argument(
        "--result", metavar="JSON", help="do not make the call; the code gets this result (checked against the skill's "
        "returns)"
    )
    p.set_defaults(run=cmd_approve)


def _resume_parser(sub: _Subparsers, common: _Parser) -> None:
    p = sub.add_parser("resume", parents=[common], help="continue a run: after approve, a crash or an error")
    p.add_argument("run_id", metavar="RUN", help="a run id, or a unique prefix of one")
    add_output_options(p)
    p.set_defaults(run=cmd_resume)


#: The commands this package parses, in the order ``--help`` lists them, each as
#: ``module:function`` of the function that adds its parser: a command's module is
#: imported only when the command is named (or for ``--help``).
_COMMANDS = {
    "invoke": "agent_apps.cli:_invoke_parser",
    "run": "agent_apps.cli.run:_run_parser",
    "chat": "agent_apps.cli.run:_chat_parser",
    "approve": "agent_apps.cli:_approve_parser",
    "resume": "agent_apps.cli:_resume_parser",
    "list": "agent_apps.cli.skills:_list_parser",
    "describe": "agent_apps.cli.skills:_describe_parser",
    "config": "agent_apps.cli.skills:_config_parser",
    "new": "agent_apps.cli.new:_new_parser",
    "doctor": "agent_apps.cli.doctor:_doctor_parser",
    "mcp": "agent_apps.cli.mcp:_mcp_parser",
    "sandbox": "agent_apps.cli.sandbox:_sandbox_parser",
    "completion": "agent_apps.cli.completion:_completion_parser",
}


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
