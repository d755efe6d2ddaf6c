"""``agent-apps batch``: run a skill once per line of a JSONL file (imported only for it).

Exit status: 0 every input's run succeeded; 1 some failed (how many on stderr, their
errors in the results file); 2 a bad command line, an unknown skill, a missing input
file, a results file that does not belong to this input; 130 interrupted (Ctrl-C or
SIGTERM): the results file holds every run that finished, ``--resume`` runs the rest.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from typing import Any

from ..terminal import printable
from . import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, UsageError, _is_name, _manager, _number, _Parser, tenant_option

__all__ = ["parse", "parser"]


def parse(argv: list[str]) -> argparse.Namespace:
    """Parse ``batch ...``; the namespace's ``run`` carries it out."""
    args = parser().parse_intermixed_args(argv[1:])
    args.command = "batch"
    args.run = run
    return args


def parser() -> argparse.ArgumentParser:
    """The parser of ``batch`` (also the shell's completion of it)."""
    parser = _Parser(
        prog="agent-apps batch",
        description="Run NAME once per line of a JSONL file (one JSON object of args a line), several at "
        "once, and append one result line per input to the output as each run finishes.",
    )
    parser.add_argument("name", metavar="NAME", help="a skill name (or, without --ray, a path to a skill file)")
    parser.add_argument("--input", required=True, metavar="FILE", help="the inputs: one JSON object of args a line")
    parser.add_argument("--output", required=True, metavar="FILE", help="where the result lines go (appended)")
    parser.add_argument(
        "--concurrency", type=_number(int, 1), metavar="N",
        help="runs at once (default: what this machine holds; on Ray, 4 per worker)",
    )
    parser.add_argument(
        "--ray", metavar="ADDRESS|auto",
        help="spread the runs over a Ray cluster: its address, or auto (the cluster this machine belongs to, "
        "else a new local one); needs the ray extra",
    )
    parser.add_argument(
        "--retries", type=_number(int, 0), metavar="N",
        help="with --ray: run an input again up to N times when its worker dies (default 3)",
    )
    parser.add_argument(
        "--tenant", metavar="ID", help="the tenant every run serves (ctx.run.tenant_id; runs list --tenant)"
    )
    parser.add_argument("--resume", action="store_true", help="skip the inputs that already have a result line")
    parser.add_argument(
        "--rerun-failed", action="store_true", help="with --resume: run the inputs that failed again too"
    )
    parser.add_argument("--events", action="store_true", help="progress as JSON lines on stderr")
    parser.add_argument(
        "--path", action="append", default=[], metavar="DIR", help="add DIR to the search path (repeatable)"
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    return parser


def run(args: argparse.Namespace) -> int:
    from ..batch import Batch
    from ..batch.files import InputFile, ResultsFile, ResumeError, drop_failed, read_results
    from ..batch.progress import Progress

    if args.retries is not None and not args.ray:
        raise UsageError("--retries applies to --ray only (a local batch has no workers to lose)")
    if args.rerun_failed and not args.resume:
        raise UsageError("--rerun-failed goes with --resume")
    if not os.path.isfile(args.input):
        raise UsageError(f"--input {args.input}: no such file")
    if args.ray and not _is_name(args.name):
        raise UsageError(
            f"with --ray, NAME must be a skill name, not {args.name!r}: put the file in a directory and add it "
            "with --path (the search path is shipped to the cluster)"
        )
    if args.tenant is not None:
        tenant_option(args.tenant)
    cm = _manager(args)
    skill = cm.get(args.name) if _is_name(args.name) else cm._resolve(args.name, None)
    if not args.resume and os.path.exists(args.output) and os.path.getsize(args.output) > 0:
        raise UsageError(
            f"--output {args.output} exists: add --resume to run only the inputs it has no result for, "
            "or choose another file"
        )
    inputs = InputFile(args.input, skill.name)
    rerun: set[int] = set()
    try:
        done, note = read_results(args.output) if args.resume else ({}, None)
        if note:
            print(f"agent-apps batch: {note}", file=sys.stderr)
        if args.rerun_failed and any(not d.ok for d in done.values()):
            rerun = {d.index for d in done.values() if not d.ok}
            drop_failed(args.output)
            done, _ = read_results(args.output)
        total = inputs.check(done)
    except ResumeError as exc:
        raise UsageError(str(exc)) from None
    # the run each input starts is recorded first, so a --resume after a crash takes it up
    # from its journal; inputs run again on purpose (--rerun-failed) start afresh
    output = os.path.realpath(args.output)
    store = cm.state
    if args.resume:
        runs = {index: run for index, run in store.batch_runs.runs(output).items() if index not in rerun}
    else:
        store.batch_runs.forget(output)
        runs = {}
    failed_before = sum(1 for d in done.values() if not d.ok)
    if total == len(done):  # nothing left: no workers, no cluster
        print(f"agent-apps batch: every one of the {total} inputs has a result in {args.output}", file=sys.stderr)
        if failed_before:
            print(f"error: {failed_before} of {total} runs failed; their errors are in {args.output} "
                  "(once fixed, --resume --rerun-failed runs them again)", file=sys.stderr)
        return EXIT_FAILED if failed_before else EXIT_OK
    try:
        results = ResultsFile(args.output, inputs)
    except OSError as exc:
        raise UsageError(f"--output {args.output}: {exc.strerror}") from None
    batch = Batch(
        cm, skill, inputs.inputs(done, batch=output, runs=runs), concurrency=args.concurrency, ray=args.ray,
        retries=3 if args.retries is None else args.retries, tenant=args.tenant,
    )
    progress = Progress(sys.stderr, skill.name, total - len(done), events=args.events)

    async def main() -> None:
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        if task is not None:
            loop.add_signal_handler(signal.SIGTERM, task.cancel)  # as Ctrl-C: whole lines, then stop
        async with batch:
            await batch.start()
            progress.start(concurrency=batch.concurrency, workers=batch.workers, skipped=len(done),
                           output=args.output)
            async for result in batch:
                progress.add(results.write(result))

    interrupted = False
    try:
        asyncio.run(main())
    except (KeyboardInterrupt, asyncio.CancelledError):
        interrupted = True
    finally:
        results.close()
    progress.end(interrupted=interrupted)
    if interrupted:
        print(
            f"agent-apps batch: interrupted after {progress.done} of {progress.total} runs; {args.output} holds every "
            "finished one: run the same command with --resume to run the rest",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    failed = failed_before + progress.failed
    if failed:
        first = _first_failure(progress, failed_before)
        print(
            f"error: {failed} of {len(done) + progress.done} runs failed{first}; their errors are in {args.output} "
            "(once fixed, --resume --rerun-failed runs them again)",
            file=sys.stderr,
        )
        return EXIT_FAILED
    return EXIT_OK


def _first_failure(progress: Any, failed_before: int) -> str:
    result = progress.first_failure
    if result is None:
        return f" ({failed_before} before this run)"
    kind = (result.error or {}).get("type", "error")
    return f" (the first: index {result.index}, {printable(str(kind))})"

