"""Running a subprocess safely: a minimal environment, capped output, a timeout that
kills the whole process group, and cancellation that does the same.

* The child never inherits the host environment: it gets :data:`ALLOWED_ENV` taken
  from the host by name, plus the variables a tool declares. API keys and tokens in
  the host environment stay there.
* Output is read as it comes and at most ``output_limit`` bytes (stdout and stderr
  together) are kept; the rest is drained and counted, and a notice says so.
* The child starts a new session (its own process group). On timeout, on
  cancellation (``ctx.signal`` or task cancel) and when the child exits, the group is
  killed, so grandchildren (``sleep 1000 &``) do not outlive the call. A process that
  starts its *own* session (``setsid``) escapes this; containers are the tool for that.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal as _signal
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import LimitExceeded

if TYPE_CHECKING:
    from ..context import Signal

__all__ = ["ALLOWED_ENV", "ProcessResult", "build_env", "run"]

#: Host variables every subprocess gets (when the host has them).
ALLOWED_ENV: tuple[str, ...] = ("PATH", "HOME", "USER", "LANG", "LC_ALL", "TERM", "SHELL", "TMPDIR", "TZ")

DEFAULT_TIMEOUT = 120.0
DEFAULT_OUTPUT_LIMIT = 200 * 1024
#: How long to wait for pipes to close, and for the exit status, after the group is
#: killed: a process that escaped the group may hold a pipe open, and a lost exit
#: notification must not hang the caller.
_DRAIN_GRACE = 2.0
_REAP_GRACE = 10.0
_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass
class ProcessResult:
    """What a finished subprocess produced."""

    exit_code: int
    stdout: str
    stderr: str
    truncated: bool
    total_bytes: int

    def to_json(self) -> dict[str, object]:
        return {"exit_code": self.exit_code, "stdout": self.stdout, "stderr": self.stderr, "truncated": self.truncated}


def build_env(
    declared: Mapping[str, str] | Iterable[str] | None = None, *, host: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The child's environment: the allow-list plus ``declared``, taken from ``host``.

    ``declared`` is a list of host variable names, or a mapping of names to values in
    which ``${NAME}`` is replaced by the host's ``NAME`` (the tools.yaml ``env:`` form);
    a mapping entry whose references are all missing from the host is left out.
    """
    host = os.environ if host is None else host
    env = {key: host[key] for key in ALLOWED_ENV if key in host}
    if declared is None:
        return env
    if isinstance(declared, Mapping):
        for key, template in declared.items():
            value = str(template)
            refs = _REF.findall(value)
            if refs and not any(ref in host for ref in refs):
                continue
            env[str(key)] = _REF.sub(lambda m: host.get(m.group(1), ""), value)
    else:
        for key in declared:
            if key in host:
                env[key] = host[key]
    return env


class _Capture:
    """Keeps the first ``limit`` bytes of both streams together; counts the rest."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.kept = 0
        self.total = 0
        self.parts: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}

    def feed(self, stream: str, data: bytes) -> None:
        self.total += len(data)
        room = self.limit - self.kept
        if room > 0:
            chunk = data[:room]
            self.parts[stream] += chunk
            self.kept += len(chunk)

    def text(self, stream: str) -> str:
        return self.parts[stream].decode("utf-8", errors="replace")

    @property
    def truncated(self) -> bool:
        return self.total > self.kept

    def notice(self) -> str:
        return (
            f"\n[output truncated by agent-apps: kept {self.kept} of {self.total} bytes "
            f"(security.output_kb); narrow the command or redirect to a file]"
        )


async def run(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str | os.PathLike[str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    output_limit: int = DEFAULT_OUTPUT_LIMIT,
    signal: Signal | None = None,
    name: str = "subprocess",
) -> ProcessResult:
    """Run ``argv`` (no shell) and return its exit code and capped output.

    Raises :class:`LimitExceeded` on timeout (the group is killed first; the message
    carries the start of the output), ``FileNotFoundError`` if the program is missing.
    """
    starting = asyncio.ensure_future(
        asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
        )
    )
    try:
        proc = await asyncio.shield(starting)
    except asyncio.CancelledError:
        # Cancelled while asyncio was still setting the child up: it may be running
        # already (and have started others); asyncio would kill the child alone.
        with contextlib.suppress(BaseException):
            started = await asyncio.wait_for(starting, _REAP_GRACE)
            _kill_group(started.pid)
            await asyncio.wait_for(_reap(started), _REAP_GRACE)
        raise
    capture = _Capture(output_limit)
    readers = [
        asyncio.ensure_future(_pump(proc.stdout, "stdout", capture)),
        asyncio.ensure_future(_pump(proc.stderr, "stderr", capture)),
    ]
    remove = signal.add_callback(lambda reason: _kill_group(proc.pid)) if signal is not None else (lambda: None)
    try:
        try:
            await asyncio.wait_for(proc.wait(), timeout)
        except TimeoutError:
            _kill_group(proc.pid)
            await _finish(proc, readers)
            head = capture.text("stdout")[:2000]
            raise LimitExceeded(
                f"{name}: timed out after {timeout:g} s; its process group was killed"
                + (f"\n--- output so far ---\n{head}" if head else ""),
                skill=name,
            ) from None
        # The child exited: kill what it left behind, then collect the pipes.
        _kill_group(proc.pid)
        await _finish(proc, readers)
    except BaseException:
        _kill_group(proc.pid)
        for reader in readers:
            reader.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(asyncio.shield(_reap(proc)), _REAP_GRACE)
        raise
    finally:
        remove()
    if signal is not None:
        signal.raise_if_cancelled()
    stdout, stderr = capture.text("stdout"), capture.text("stderr")
    if capture.truncated:
        if capture.parts["stderr"] and not capture.parts["stdout"]:
            stderr += capture.notice()
        else:
            stdout += capture.notice()
    return ProcessResult(
        proc.returncode if proc.returncode is not None else -1, stdout, stderr, capture.truncated, capture.total
    )


async def _pump(stream: asyncio.StreamReader | None, name: str, capture: _Capture) -> None:
    if stream is None:
        return
    while True:
        data = await stream.read(65536)
        if not data:
            return
        capture.feed(name, data)


async def _finish(proc: asyncio.subprocess.Process, readers: Sequence[asyncio.Future[None]]) -> None:
    """Wait for the child and its pipes, but not forever: a process that escaped the
    group (``setsid``) may hold a pipe open."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(_reap(proc), _REAP_GRACE)
    _done, pending = await asyncio.wait(readers, timeout=_DRAIN_GRACE)
    for reader in pending:
        reader.cancel()


async def _reap(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        await proc.wait()


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, _signal.SIGKILL)
