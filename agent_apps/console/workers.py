"""Resuming runs for the console: each in a worker process of its own.

A decision taken on the page is recorded at once (as ``agent-apps approve`` does);
the run then goes on in ``agent-apps resume RUN``, started by the console with the
store it serves and nothing on its standard input (so nobody is asked on a terminal: a
call that asks again checkpoints the run again). The console stays responsive whatever
the run does, a run that crashes takes nothing of the console with it, and the page
follows the run through the store as for any other process. The worker's exit status
and the end of its output are kept for the run's page; the workers still running when
the console stops get Ctrl-C (their runs end ``cancelled``, and can be resumed).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from dataclasses import dataclass, field

__all__ = ["OUTPUT_LIMIT", "Worker", "Workers"]

#: Characters kept of the end of a worker's output (stdout and stderr).
OUTPUT_LIMIT = 4000
#: Seconds a worker gets to end after Ctrl-C when the console stops, before it is killed.
STOP_GRACE = 5.0


@dataclass
class Worker:
    run_id: str
    process: asyncio.subprocess.Process
    output: str = ""
    returncode: int | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def running(self) -> bool:
        return self.returncode is None

    def state(self) -> tuple[int | None, str]:
        return self.returncode, self.output


class Workers:
    """The worker processes one console started, by run id (the latest for each)."""

    def __init__(self, store_location: str) -> None:
        #: What opens the store (a file, or a URL with its password): the workers' AGENT_APPS_STATE.
        self.store_location = store_location
        self.by_run: dict[str, Worker] = {}
        #: Bumped when a worker starts or ends (live updates look at it).
        self.version = 0

    def get(self, run_id: str) -> Worker | None:
        return self.by_run.get(run_id)

    async def resume(self, run_id: str) -> Worker:
        """Start ``agent-apps resume RUN`` for ``run_id`` (already decided)."""
        current = self.by_run.get(run_id)
        if current is not None and current.running:
            return current
        env = {**os.environ, "AGENT_APPS_STATE": self.store_location, "NO_COLOR": "1"}
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "agent_apps",
            "resume",
            run_id,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=env,
        )
        worker = self.by_run[run_id] = Worker(run_id, process)
        self.version += 1
        asyncio.get_running_loop().create_task(self._follow(worker))
        return worker

    async def _follow(self, worker: Worker) -> None:
        stream = worker.process.stdout
        assert stream is not None
        while chunk := await stream.read(4096):
            worker.output = (worker.output + chunk.decode("utf-8", "replace"))[-OUTPUT_LIMIT:]
        worker.returncode = await worker.process.wait()
        self.version += 1
        worker.done.set()

    async def close(self) -> None:
        """Stop the workers still running: Ctrl-C, then a kill after :data:`STOP_GRACE`."""
        running = [w for w in self.by_run.values() if w.running]
        for worker in running:
            with contextlib.suppress(ProcessLookupError):
                worker.process.send_signal(signal.SIGINT)
        if not running:
            return
        _, late = await asyncio.wait([asyncio.ensure_future(w.done.wait()) for w in running], timeout=STOP_GRACE)
        for worker in running:
            if worker.running:
                with contextlib.suppress(ProcessLookupError):
                    worker.process.kill()
        for task in late:
            await task
