"""``agent-apps sessions ...``, ``agent-apps runs ...`` and ``agent-apps state copy``
(imported only for them).

The store is found as everywhere else (``AGENT_APPS_STATE``, ``state.path`` in the user
or project config, ``~/.agent-apps/state.db``); no skill is loaded. Errors are the
store's typed errors: the main command line prints them in one line, exit status 2 for
an unknown session or run, a bad export file, an id that exists already, or a copy
into a store that is not empty.

Everything stored came from models, agent code and tools, so what these commands print
is escaped for the terminal (:mod:`agent_apps.terminal`): text through ``printable``,
JSON with terminal-steering characters as ``\\u`` escapes (the same JSON values).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from ..state import open_store
from ..state.errors import SnapshotInvalid
from ..state.run_view import clock as _when
from ..terminal import json_line, printable
from . import _number, _Parser, _table
from .skills import _Printable

__all__ = ["parse", "parser"]

#: The reason of a stop asked for on the command line, unless ``--reason`` gives one.
STOP_REASON = "agent-apps runs stop"
#: Seconds between two looks at a run that ``runs stop --wait`` waits for.
_WAIT_POLL = 0.2


def parse(argv: list[str]) -> argparse.Namespace:
    """Parse ``sessions ...`` or ``runs ...``; the namespace's ``run`` carries it out."""
    return parser().parse_args(argv)


def parser() -> argparse.ArgumentParser:
    """The parser of ``sessions`` and ``runs`` (also the shell's completion of them)."""
    common = _Parser(add_help=False)
    common.add_argument("--debug", action="store_true", help="show tracebacks")
    parser = _Parser(prog="agent-apps", parents=[common])  # errors in the "error: ..." style
    groups = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    sessions = groups.add_parser("sessions", help="conversations kept in the state store", parents=[common])
    sub = sessions.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = sub.add_parser("list", parents=[common], help="every session, most recently used first")
    p.add_argument("--json", action="store_true", help="JSON output")
    p.set_defaults(run=sessions_list)
    p = sub.add_parser("show", parents=[common], help="a session's messages, memory and summary")
    p.add_argument("id", metavar="ID")
    p.add_argument("--json", action="store_true", help="JSON output")
    p.set_defaults(run=sessions_show)
    p = sub.add_parser("export", parents=[common], help="write a session as a versioned JSON snapshot to stdout")
    p.add_argument("id", metavar="ID")
    p.set_defaults(run=sessions_export)
    p = sub.add_parser("import", parents=[common], help="create a session from an export (FILE, or - for stdin)")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--as", dest="as_id", metavar="ID", help="import it under this id")
    p.set_defaults(run=sessions_import)
    p = sub.add_parser("fork", parents=[common], help="copy a session to a new id")
    p.add_argument("id", metavar="ID")
    p.add_argument("new", metavar="NEW")
    p.set_defaults(run=sessions_fork)
    p = sub.add_parser(
        "reset-guidance", parents=[common], help="forget the guidance skills a session loaded (its messages stay)"
    )
    p.add_argument("id", metavar="ID")
    p.set_defaults(run=sessions_reset_guidance)
    p = sub.add_parser("rm", parents=[common], help="remove a session and its messages (its runs stay)")
    p.add_argument("id", metavar="ID")
    p.set_defaults(run=sessions_rm)
    p = sub.add_parser(
        "prune", parents=[common], help="remove the sessions not used for a while (their runs stay)",
        description="Remove every session last used longer ago than --older-than, with its messages "
        "(its runs stay recorded: runs prune removes those).",
    )
    _prune_options(p)
    p.set_defaults(run=sessions_prune)

    runs = groups.add_parser("runs", help="recorded agent runs and their reports", parents=[common])
    sub = runs.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = sub.add_parser("list", parents=[common], help="recent runs, newest first")
    p.add_argument("--session", metavar="ID", help="only runs of this session")
    p.add_argument("--tenant", metavar="ID", help="only runs that serve this tenant")
    p.add_argument("--limit", type=_number(int, 0), default=50, metavar="N", help="at most N runs (default 50; 0: all)")
    p.add_argument("--json", action="store_true", help="JSON output")
    p.set_defaults(run=runs_list)
    p = sub.add_parser(
        "show", parents=[common], help="what happened in a run: each agent's turns, code, calls, timings and tokens"
    )
    p.add_argument("run_id", metavar="RUN", help="a run id, or a unique prefix of one")
    p.add_argument("--json", action="store_true", help="JSON output (reports and traces)")
    p.set_defaults(run=runs_show)
    p = sub.add_parser("export", parents=[common], help="write a run as a versioned JSON snapshot to stdout")
    p.add_argument("run_id", metavar="RUN", help="a run id, or a unique prefix of one")
    p.set_defaults(run=runs_export)
    p = sub.add_parser(
        "stop", parents=[common], help="stop a run gracefully: the call in flight finishes, no further turn starts"
    )
    p.add_argument("run_id", metavar="RUN", help="a run id, or a unique prefix of one")
    p.add_argument("--reason", default=STOP_REASON, help=f"why (in its status message; default: {STOP_REASON!r})")
    p.add_argument("--wait", action="store_true", help="wait until it has stopped, and print its status")
    p.set_defaults(run=runs_stop)
    p = sub.add_parser("import", parents=[common], help="restore a run from an export (FILE, or - for stdin)")
    p.add_argument("file", metavar="FILE")
    p.add_argument(
        "--path", action="append", default=[], metavar="DIR", help="where its skills are, to compare its tools"
    )
    p.set_defaults(run=runs_import)
    p = sub.add_parser(
        "prune", parents=[common], help="remove the runs that ended a while ago",
        description="Remove every run that ended longer ago than --older-than, with its agents' reports, "
        "traces, journal and checkpoint. A run still recorded as running is kept.",
    )
    _prune_options(p)
    p.set_defaults(run=runs_prune)

    state = groups.add_parser("state", help="the state store as a whole", parents=[common])
    sub = state.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = sub.add_parser(
        "copy", parents=[common], help="copy every session, run, journal, schedule and index entry into another store"
    )
    p.add_argument("source", metavar="FROM", help="a store: an SQLite file, or a postgresql:// URL")
    p.add_argument("target", metavar="TO", help="an empty store (made when missing): a file, or a postgresql:// URL")
    p.add_argument("--replace", action="store_true", help="delete what TO holds first (it must be empty otherwise)")
    p.set_defaults(run=state_copy)
    return parser


def _prune_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--older-than", required=True, type=_age, metavar="AGE",
        help="how long ago: a number and a unit, s, m, h, d or w (30d, 12h)",
    )
    p.add_argument("--dry-run", action="store_true", help="list what would be removed, remove nothing")


#: ``--older-than`` units, in seconds.
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def _age(text: str) -> str:
    """``--older-than``: checked here, read by :func:`_cutoff`."""
    try:
        _cutoff(text)
    except (KeyError, ValueError):
        raise argparse.ArgumentTypeError(f"a number and a unit (s, m, h, d, w), like 30d, not {text!r}") from None
    return text


def _cutoff(age: str) -> float:
    """The time ``age`` (``30d``) ago."""
    seconds = float(age[:-1]) * _UNITS[age[-1:]]
    if not 0 <= seconds < float("inf"):
        raise ValueError(age)
    return time.time() - seconds


def _pruned(args: argparse.Namespace, what: str, items: list[Any], rows: list[tuple[str, ...]]) -> int:
    """Say what was (or, with --dry-run, would be) removed: a table, then a count."""
    if rows[1:]:
        _table(rows, sys.stdout)
    verb = "would remove" if args.dry_run else "removed"
    print(f"{verb} {len(items)} {what}{'' if len(items) == 1 else 's'} older than {args.older_than}", file=sys.stderr)
    return 0



def _json(value: Any) -> None:
    sys.stdout.write(json_line(value, indent=2) + "\n")


def _short(text: str, width: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


# -- sessions ----------------------------------------------------------------------------


def _listing(args: argparse.Namespace, data: list[Any], rows: list[tuple[str, ...]], empty: str) -> int:
    """Print a listing: JSON with --json, else a table under its header row."""
    if args.json:
        _json(data)
    elif len(rows) == 1:
        print(empty, file=sys.stderr)
    else:
        _table(rows, sys.stdout)
    return 0


def sessions_list(args: argparse.Namespace) -> int:
    sessions = open_store().sessions.list()
    rows: list[tuple[str, ...]] = [("ID", "MESSAGES", "TOKENS", "UPDATED")]
    rows += [(s.id, str(s.messages), f"~{s.tokens}", _when(s.updated_at)) for s in sessions]
    data = [{k: v for k, v in s.to_json().items() if k not in ("memory", "summary", "meta")} for s in sessions]
    return _listing(args, data, rows, "no sessions yet: agent-apps invoke NAME --session ID starts one")


def sessions_show(args: argparse.Namespace) -> int:
    store = open_store()
    info = store.sessions.get(args.id)
    entries = store.sessions.messages(args.id)
    runs = store.runs.list(session=args.id)
    if args.json:
        data = info.to_json()
        data["messages"] = [{"seq": e.seq, "tokens": e.tokens, **e.message} for e in entries]
        data["runs"] = [run.id for run in runs]
        _json(data)
        return 0
    out = _Printable(sys.stdout)
    out.write(f"session {info.id}\n")
    out.write(f"  created {_when(info.created_at)}, updated {_when(info.updated_at)}\n")
    out.write(f"  {info.messages} messages, ~{info.tokens} tokens\n")
    if info.summary_through:
        what = f"summarized: {_short(info.summary, 160)}" if info.summary else "left out (summarizing failed)"
        out.write(f"  messages 1-{info.summary_through} {what}\n")
    if info.memory:
        out.write(f"  memory: {_short(json.dumps(info.memory, ensure_ascii=False), 160)}\n")
    loaded = info.meta.get("loaded_skills")
    if loaded:
        out.write(f"  loaded guidance: {', '.join(map(str, loaded))}\n")
    if runs:
        out.write(f"  runs: {len(runs)} (latest {runs[0].id[:12]}, {runs[0].status})\n")
    for entry in entries:
        message = entry.message
        role = message.get("role")
        label = "tool result" + (" (error)" if message.get("error") else "") if role == "tool" else role
        text = message.get("text") or ""
        out.write(f"\n#{entry.seq} {label}: {_short(text) if text else ''}".rstrip() + "\n")
        for call in message.get("tool_calls") or ():
            code = (call.get("input") or {}).get("code")
            out.write(f"  ⚙ {call.get('name')}: {_short(code) if code else json.dumps(call.get('input'))}\n")
    return 0


def sessions_prune(args: argparse.Namespace) -> int:
    pruned = open_store().sessions.prune(_cutoff(args.older_than), dry_run=args.dry_run)
    rows: list[tuple[str, ...]] = [("ID", "MESSAGES", "UPDATED")]
    rows += [(s.id, str(s.messages), _when(s.updated_at)) for s in pruned]
    return _pruned(args, "session", pruned, rows)


def sessions_export(args: argparse.Namespace) -> int:
    _json(open_store().sessions.export(args.id))
    return 0


def _read(file: str) -> tuple[str, str]:
    """An export file's text (``-``: stdin) and the name to give it in errors."""
    source = "<stdin>" if file == "-" else file
    try:
        return (sys.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")), source
    except (OSError, UnicodeDecodeError) as exc:
        raise SnapshotInvalid(f"cannot read it: {getattr(exc, 'strerror', None) or exc}", source=source) from None


def sessions_import(args: argparse.Namespace) -> int:
    text, source = _read(args.file)
    if args.as_id is not None:
        from ..state.sessions import session_id_problem

        problem = session_id_problem(args.as_id)
        if problem:
            raise SnapshotInvalid(problem, source="--as")
    info = open_store().sessions.import_(text, as_id=args.as_id, source=source)
    print(printable(f"imported session {info.id} ({info.messages} messages)"))
    return 0


def sessions_fork(args: argparse.Namespace) -> int:
    from ..state.sessions import session_id_problem

    problem = session_id_problem(args.new)
    if problem:
        raise SnapshotInvalid(problem, source="NEW")
    info = open_store().sessions.fork(args.id, args.new)
    print(f"forked session {args.id} as {info.id} ({info.messages} messages)")
    return 0


def sessions_reset_guidance(args: argparse.Namespace) -> int:
    forgotten = open_store().sessions.reset_guidance(args.id)
    if forgotten:
        names = ", ".join(forgotten)
        print(f"session {args.id}: forgot the guidance it loaded ({names}); its messages and memory stay")
    else:
        print(f"session {args.id}: no loaded guidance to forget")
    return 0


def sessions_rm(args: argparse.Namespace) -> int:
    open_store().sessions.remove(args.id)
    print(f"removed session {args.id}")
    return 0


# -- runs --------------------------------------------------------------------------------


def _duration(start: float | None, end: float | None) -> str:
    return f"{end - start:.1f}s" if start and end else "-"


def runs_list(args: argparse.Namespace) -> int:
    runs = open_store().runs.list(session=args.session, tenant=args.tenant, limit=args.limit or None)
    tenants = any(run.tenant_id for run in runs)  # the column only where some run serves a tenant
    head = ("RUN", "STARTED", "STATUS", "NAME", "SESSION", *(("TENANT",) if tenants else ()), "TOKENS IN/OUT", "TIME")
    rows: list[tuple[str, ...]] = [head]
    for run in runs:
        tokens = f"{run.input_tokens}/{run.output_tokens}"
        duration = _duration(run.started_at, run.ended_at)
        tenant = (run.tenant_id or "-",) if tenants else ()
        rows.append(
            (run.id[:12], _when(run.started_at), run.status, run.name, run.session_id or "-", *tenant, tokens, duration)
        )
    empty = "no runs recorded" + (f" in session {args.session}" if args.session else "")
    empty += f" for tenant {args.tenant}" if args.tenant else ""
    return _listing(args, [run.to_json() for run in runs], rows, empty)


def runs_show(args: argparse.Namespace) -> int:
    """What happened in a run (see :mod:`agent_apps.state.run_text`); ``--json``: all of it."""
    from ..state.run_view import load_run

    store = open_store()
    view = load_run(store, args.run_id)
    run, point = view.run, view.checkpoint
    if args.json:
        _json({**run.to_json(), "agents": [a.to_json() for a in view.agents], "checkpoint": point and point.to_json()})
        return 0
    import shutil

    from ..state.run_text import write_run

    write_run(view, sys.stdout, shutil.get_terminal_size((100, 24)).columns)
    if _resumable(point, run.status):
        print(printable(f"\nagent-apps resume {run.id} continues it"))
    return 0


def runs_stop(args: argparse.Namespace) -> int:
    """Ask a run to stop gracefully (docs/agent.md, "Stopping a run"): the process that
    runs it stops it within a moment; a run nothing runs (waiting for approval, its
    process gone) is stopped here."""
    store = open_store()
    run, now = store.runs.stop(args.run_id, args.reason)
    if now:
        print(printable(f"stopped run {run.id} (it was {run.status}); its status is stopped"))
        return 0
    where = f"process {run.pid}" + (f" on {run.host}" if run.host else "")
    print(printable(f"asked run {run.id} ({where}) to stop: the call in flight finishes, no further turn starts"))
    if not args.wait:
        return 0
    while True:
        time.sleep(_WAIT_POLL)
        run = store.runs.get(run.id)
        if run.status != "running":  # ended, or its process is gone (interrupted)
            break
    print(printable(f"run {run.id} ended: {run.status}"))
    return 0


def runs_prune(args: argparse.Namespace) -> int:
    pruned = open_store().runs.prune(_cutoff(args.older_than), dry_run=args.dry_run)
    rows: list[tuple[str, ...]] = [("RUN", "STARTED", "STATUS", "NAME")]
    rows += [(run.id[:12], _when(run.started_at), run.status, run.name) for run in pruned]
    return _pruned(args, "run", pruned, rows)


def runs_export(args: argparse.Namespace) -> int:
    from ..state.run_snapshot import export_run

    _json(export_run(open_store(), args.run_id))
    return 0


def runs_import(args: argparse.Namespace) -> int:
    """Restore a run; warn about tools its agents had that are gone, or new ones."""
    from ..manager import ContextManager
    from ..state.run_snapshot import import_run, tool_changes

    text, source = _read(args.file)
    store = open_store()
    cm = ContextManager(search_path=args.path, state=store)
    run = import_run(store, text, source=source, skills=cm.catalog.skills)
    for warning in tool_changes(json.loads(text), cm):
        print(f"warning: {printable(warning)}", file=sys.stderr)
    point = store.journal.checkpoint(run["id"])
    hint = f"; agent-apps resume {run['id']} continues it" if _resumable(point, run["status"]) else ""
    print(printable(f"imported run {run['id']} ({run['status']}){hint}"))
    return 0


def _resumable(point: Any, status: str) -> bool:
    from ..state.journal import FINISHED

    return point is not None and status not in FINISHED and status != "running"


# -- the store as a whole ----------------------------------------------------------------


def state_copy(args: argparse.Namespace) -> int:
    """Copy FROM into TO; print how many rows of each kind."""
    from ..state import StateStore
    from ..state.copy import copy_store, describe

    source, target = StateStore(args.source), StateStore(args.target)
    try:
        copied = copy_store(source, target, replace=args.replace)
    finally:
        source.close()
        target.close()
    print(f"copied {describe(copied)} from {source.path} to {target.path}")
    return 0
