"""The ``agent-apps`` command (CONTRACT section 5).

Exit status: 0 done; 1 the skill failed; 2 the call was wrong (unknown skill, invalid
args, not allowed, bad command line); 130 interrupted. Errors go to stderr in one or
two plain lines; ``--debug`` adds the traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from .errors import AgentAppsError
from .terminal import json_line, printable

__all__ = ["main"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class UsageError(Exception):
    """A bad command line (exit status 2)."""


def main(argv: Sequence[str] | None = None) -> int:
    parser, commands = _parser()
    args = _parse(parser, commands, list(sys.argv[1:] if argv is None else argv))
    if not getattr(args, "command", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return int(args.run(args) or EXIT_OK)
    except KeyboardInterrupt:
        print("agent-apps: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except UsageError as exc:
        print(f"agent-apps: {printable(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    except AgentAppsError as exc:
        return _report(exc, args)
    except Exception as exc:  # a bug of ours: still one clear line unless --debug
        if args.debug:
            raise
        print(
            f"agent-apps: internal error: {type(exc).__name__}: {printable(str(exc))} (run with --debug for details)",
            file=sys.stderr,
        )
        return EXIT_FAILED


def _parse(
    parser: argparse.ArgumentParser, commands: dict[str, argparse.ArgumentParser], argv: list[str]
) -> argparse.Namespace:
    """Options may come anywhere (``invoke NAME --path DIR key=value``): argparse
    only allows that per subcommand, with ``parse_intermixed_args``."""
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
    from .manager import ContextManager

    for path in args.path:
        if not os.path.isdir(path):
            print(f"agent-apps: warning: --path {path}: no such directory", file=sys.stderr)
    return ContextManager(search_path=args.path)


def cmd_invoke(args: argparse.Namespace) -> int:
    cm = _manager(args)
    skill = cm.get(args.name) if _is_name(args.name) else cm._resolve(args.name, None)
    call_args = _call_args(args, skill.params)
    from .progress import JsonLines, ProgressPrinter

    topic = f"cli.{cm.id}"
    cm.events.subscribe(topic, JsonLines(sys.stderr) if args.events else ProgressPrinter(sys.stderr))
    result = cm.invoke_sync(skill, call_args, nonlocals={"agent": {"events": topic}})
    _print_result(result, as_json=args.json, out=sys.stdout)
    return EXIT_OK


def cmd_list(args: argparse.Namespace) -> int:
    cm = _manager(args)
    catalog = cm.catalog
    if args.json:
        entries = [
            {
                **entry.skill.describe(),
                "hidden": entry.skill.hidden,
                "shadowed_by": entry.shadowed_by.where() if entry.shadowed_by else None,
            }
            for entry in catalog.entries
            if args.all or (entry.shadowed_by is None)
        ]
        json.dump({"skills": entries, "errors": [str(e) for e in cm.errors]}, sys.stdout, indent=2)
        print()
    else:
        rows: list[tuple[str, ...]] = []
        for entry in sorted(catalog.entries, key=lambda e: e.skill.name):
            skill = entry.skill
            if not args.all and (entry.shadowed_by is not None or skill.hidden):
                continue
            if args.all:
                note = f"shadowed by {entry.shadowed_by.where()}" if entry.shadowed_by else ""
                note += " hidden" if skill.hidden else ""
                rows.append((skill.name, skill.origin, skill.where(), note.strip()))
            else:
                rows.append((skill.name, _first_line(skill.description)))
        _table(rows, sys.stdout)
    if cm.errors:
        print(f"\n{len(cm.errors)} skill file(s) could not be loaded:", file=sys.stderr)
        for error in cm.errors:
            print(f"  {printable(str(error))}", file=sys.stderr)
    return EXIT_OK


def cmd_describe(args: argparse.Namespace) -> int:
    cm = _manager(args)
    data = cm.describe(args.name)
    if args.json:
        json.dump(data, sys.stdout, indent=2)
        print()
        return EXIT_OK
    skill = cm.get(args.name)
    out = _Printable(sys.stdout)  # a skill file's text is shown, never obeyed
    print(f"{skill.name}: {skill.description}" if skill.description else skill.name, file=out)
    print(f"  kind: {skill.kind}, origin: {skill.origin} ({skill.where()})", file=out)
    props = (skill.params or {}).get("properties", {})
    required = set((skill.params or {}).get("required", ()))
    if props:
        print("  args:", file=out)
        for key, schema in props.items():
            facts = [str(schema.get("type", "any"))]
            if key in required:
                facts.append("required")
            if "default" in schema:
                facts.append(f"default {json.dumps(schema['default'])}")
            if "enum" in schema:
                facts.append("one of " + ", ".join(json.dumps(v) for v in schema["enum"]))
            desc = f": {schema['description']}" if schema.get("description") else ""
            print(f"    {key} ({', '.join(facts)}){desc}", file=out)
    elif skill.params is None:
        print("  args: none", file=out)
    if skill.returns is not None:
        print(f"  returns: {json.dumps(skill.returns)}", file=out)
    if skill.allowed_tools is not None:
        print(f"  allowed-tools: {skill.allowed_tools}", file=out)
    if skill.middleware:
        print(f"  middleware: {' '.join(skill.middleware)}", file=out)
    if skill.hidden:
        print("  hidden: yes", file=out)
    if skill.body:
        print("\n" + skill.body, file=out)
    return EXIT_OK


def cmd_config(args: argparse.Namespace) -> int:
    cm = _manager(args)
    resolved = cm.config_for(args.name) if args.name else cm.cascade.resolve(None)
    if args.json:
        json.dump({"values": resolved.values, "sources": resolved.sources}, sys.stdout, indent=2)
        print()
        return EXIT_OK
    rows: list[tuple[str, ...]] = [
        (key, json.dumps(_dotted(resolved.values, key)), source) for key, source in sorted(resolved.sources.items())
    ]
    _table(rows, sys.stdout)
    return EXIT_OK


def cmd_mcp(args: argparse.Namespace) -> int:
    """Serve the visible skills over MCP: stdio by default, streamable HTTP with --http."""
    try:
        import anyio

        from .mcp import server as mcp_server
    except ImportError as exc:
        raise UsageError(f"'agent-apps mcp' needs the mcp package: pip install 'agent-apps[mcp]' ({exc})") from None
    cm = _manager(args)
    if args.http is None:
        anyio.run(mcp_server.serve_stdio, cm)
        return EXIT_OK
    host, sep, port = args.http.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", args.http
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise UsageError(f"--http {args.http}: expected HOST:PORT or PORT, with a port from 0 to 65535")
    token = os.environ.get("AGENT_APPS_MCP_TOKEN") or None
    if not token and host not in ("127.0.0.1", "localhost", "::1"):
        raise UsageError(
            f"--http {args.http} would serve every skill to the network without authentication: "
            "set AGENT_APPS_MCP_TOKEN (clients then send 'Authorization: Bearer <token>')"
        )

    def ready(url: str) -> None:
        auth = " (Authorization: Bearer $AGENT_APPS_MCP_TOKEN required)" if token else ""
        print(f"agent-apps: serving MCP on {url}{auth}", file=sys.stderr, flush=True)

    anyio.run(lambda: mcp_server.serve_http(cm, host, int(port), path=args.http_path, token=token, ready=ready))
    return EXIT_OK


def cmd_sandbox_build(args: argparse.Namespace) -> int:
    from .sandbox import build

    path = build(force=args.force)
    print(path)
    return EXIT_OK


# -- helpers -------------------------------------------------------------------------


def _is_name(ref: str) -> bool:
    from .skill import is_skill_name

    return is_skill_name(ref)


def _call_args(args: argparse.Namespace, params: dict[str, Any] | None) -> dict[str, Any]:
    from .validation import coerce_params

    call: dict[str, Any] = {}
    if args.args is not None:
        text = args.args
        if text.startswith("@"):
            try:
                with open(text[1:], encoding="utf-8") as fh:
                    text = fh.read()
            except OSError as exc:
                raise UsageError(f"--args {args.args}: {exc.strerror}") from None
        try:
            loaded = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UsageError(f"--args is not valid JSON: {exc}") from None
        if not isinstance(loaded, dict):
            raise UsageError("--args must be a JSON object")
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


def _dotted(values: dict[str, Any], key: str) -> Any:
    for part in key.split("."):
        values = values[part]
    return values


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= 80 else line[:77] + "..."


class _Printable:
    """A text stream that escapes what it is written (see :mod:`agent_apps.terminal`)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        return self.stream.write(printable(text))

    def flush(self) -> None:
        self.stream.flush()


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


def _parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The parser, and the subcommands whose options may be intermixed with positionals."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--path", action="append", default=[], metavar="DIR", help="add DIR to the search path (repeatable)"
    )
    common.add_argument("--debug", action="store_true", help="show tracebacks")

    parser = argparse.ArgumentParser(prog="agent-apps", description="Run and inspect skills.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("invoke", parents=[common], help="invoke a skill and print its result")
    p.add_argument("name", metavar="NAME", help="a skill name, or a path to a skill file")
    p.add_argument("pairs", nargs="*", metavar="KEY=VALUE|KEY:=JSON", help="args (VALUE typed by the params schema)")
    p.add_argument("--args", metavar="JSON|@FILE", help="args as a JSON object, or @file.json")
    p.add_argument("--json", action="store_true", help="print the result as JSON even when it is a string")
    p.add_argument("--events", action="store_true", help="write agent events to stderr as JSON lines")
    p.set_defaults(run=cmd_invoke)

    p = sub.add_parser("list", parents=[common], help="list the skills on the search path")
    p.add_argument("--all", action="store_true", help="also hidden and shadowed skills, with origins")
    p.add_argument("--json", action="store_true", help="JSON output")
    p.set_defaults(run=cmd_list)

    p = sub.add_parser("describe", parents=[common], help="show a skill's description, args and result")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--json", action="store_true", help="JSON output")
    p.set_defaults(run=cmd_describe)

    p = sub.add_parser(
        "config", parents=[common], help="show the resolved config cascade and where each value came from"
    )
    p.add_argument("name", metavar="NAME", nargs="?", help="the skill whose cascade to show")
    p.add_argument("--json", action="store_true", help="JSON output")
    p.set_defaults(run=cmd_config)

    p = sub.add_parser("mcp", parents=[common], help="serve the skills as MCP tools (stdio, or --http)")
    p.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="serve streamable HTTP on HOST:PORT (HOST defaults to 127.0.0.1) instead of stdio; "
        "set AGENT_APPS_MCP_TOKEN to require a bearer token",
    )
    p.add_argument("--http-path", default="/mcp", metavar="PATH", help="the HTTP endpoint path (default /mcp)")
    p.set_defaults(run=cmd_mcp)

    p = sub.add_parser("sandbox", help="manage the WebAssembly sandbox")
    sandbox = p.add_subparsers(dest="sandbox_command", metavar="ACTION", required=True)
    p = sandbox.add_parser(
        "build", parents=[common], help="build and compile the sandbox component now (else: on first use)"
    )
    p.add_argument("--force", action="store_true", help="rebuild even if a cached component exists")
    p.set_defaults(run=cmd_sandbox_build)
    return parser, {name: sub.choices[name] for name in ("invoke", "list", "describe", "config")}


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
