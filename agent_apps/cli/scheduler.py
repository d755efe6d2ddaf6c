"""``agent-apps scheduler``: run due schedules in the foreground (imported only for it).

Logs one line per run on stderr; Ctrl-C (or SIGTERM) stops it: the runs in flight are
cancelled and recorded as ``cancelled``, and it exits with status 0.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys

from ..terminal import printable
from . import _number

__all__ = ["parse", "parser"]


def parse(argv: list[str]) -> argparse.Namespace:
    """Parse ``scheduler ...``; the namespace's ``run`` carries it out."""
    args = parser().parse_args(argv[1:])
    args.command = "scheduler"
    args.run = run
    return args


def parser() -> argparse.ArgumentParser:
    """The parser of ``scheduler`` (also the shell's completion of it)."""
    parser = argparse.ArgumentParser(
        prog="agent-apps scheduler",
        description="Run the due schedules of the state store until Ctrl-C. Schedules are made with the "
        "schedule-create skill; several schedulers may share one store.",
    )
    parser.add_argument(
        "--path", action="append", default=[], metavar="DIR", help="add DIR to the search path (repeatable)"
    )
    parser.add_argument(
        "--poll", type=_positive, default=1.0, metavar="SECONDS",
        help="look for new schedules at least this often (default 1)",
    )
    parser.add_argument(
        "--concurrency", type=_count, default=4, metavar="N", help="runs at once (default 4)"
    )
    parser.add_argument(
        "--grace", type=_seconds, default=60.0, metavar="SECONDS",
        help="how late a due time still runs under catch_up: none (default 60)",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    return parser


def run(args: argparse.Namespace) -> int:
    from ..manager import ContextManager
    from ..scheduling.scheduler import Scheduler

    for path in args.path:
        if not os.path.isdir(path):
            print(f"agent-apps: warning: --path {path}: no such directory", file=sys.stderr)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter("%(asctime)s %(message)s", "%Y-%m-%d %H:%M:%S"))
    for name, level in (("agent_apps", logging.WARNING), ("agent_apps.scheduler", logging.INFO)):
        logger = logging.getLogger(name)
        logger.setLevel(level)
    logging.getLogger("agent_apps").addHandler(handler)
    cm = ContextManager(search_path=args.path)
    scheduler = Scheduler(cm, poll=args.poll, concurrency=args.concurrency, grace=args.grace)
    store = cm.state
    schedules = store.schedules.list()
    due = [s.next_at for s in schedules if s.next_at is not None]
    from ..timing import iso

    ready = (
        f"agent-apps scheduler: {len(schedules)} schedule(s) in {store.path}"
        + (f", next due {iso(min(due))}" if due else "")
        + "; Ctrl-C stops"
    )

    async def main() -> int:
        loop = asyncio.get_running_loop()

        def stop() -> None:
            for sig in (signal.SIGINT, signal.SIGTERM):  # a second Ctrl-C interrupts at once
                loop.remove_signal_handler(sig)
            scheduler.stop()

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop)
        print(ready, file=sys.stderr, flush=True)  # once it is true: from here Ctrl-C stops gracefully
        return await scheduler.run()

    try:
        cancelled = asyncio.run(main())
    finally:
        logging.getLogger("agent_apps").removeHandler(handler)
        store.close()
    note = f" ({cancelled} run(s) in flight cancelled)" if cancelled else ""
    print(f"agent-apps scheduler: stopped{note}", file=sys.stderr)
    return 0


class _Formatter(logging.Formatter):
    """One line per event; warnings and errors say so."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 (logging's name)
        level = f"{record.levelname.lower()}: " if record.levelno >= logging.WARNING else ""
        return f"{record.asctime} {level}{printable(record.message)}"  # run errors quote agent output



_positive = _number(float, 0, above=True)
_seconds = _number(float, 0)
_count = _number(int, 1)
