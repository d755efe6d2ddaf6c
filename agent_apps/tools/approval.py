"""Human approval: the ``ask`` answer of the policy, and who gets asked.

An *approver* is any callable ``approve(request: ApprovalRequest) -> bool | str``,
plain or async. ``True`` approves; ``False`` (or ``None``) denies; a string denies
*with the human's reason*, which the agent sees in the error (``"use staging"``). An
approver that raises denies too. When the request says ``can_skip`` (a host call from
agent code), an approver may also answer :data:`SKIP` (the call is not made and the
code gets ``None``) or :class:`Result` (the call is not made and the code gets the
value the human supplied, checked against the skill's ``returns``). The MCP server can
plug in an elicitation approver with :func:`session` around each request, with no
change here.

Who is asked, first found:

1. the approver of the enclosing :func:`session` (a context variable, so each MCP
   request or each job can have its own);
2. the manager's default, set with :func:`set_approver`;
3. :class:`TerminalApprover`, when stdin and stderr are both terminals;
4. nobody: the call is denied, with a message saying approval was needed.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import sys
import threading
import weakref
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

from ..terminal import printable

if TYPE_CHECKING:
    from ..manager import ContextManager

__all__ = [
    "SKIP",
    "ApprovalRequest",
    "Approver",
    "Result",
    "TerminalApprover",
    "answer",
    "ask",
    "find_approver",
    "session",
    "set_approver",
]


@dataclass(frozen=True)
class ApprovalRequest:
    """One call waiting for a human's yes or no."""

    skill: str
    args: Mapping[str, Any]
    category: str | None
    mode: str
    #: The policy rule that asked (``security.policy.interactive.categories.admin``).
    rule: str
    #: Skill names from the outermost invocation down to the caller.
    chain: tuple[str, ...] = field(default=())
    #: The approver may answer :data:`SKIP` (the call is not made; a host call from
    #: agent code then returns ``None`` to the code).
    can_skip: bool = False

    def summary(self, limit: int = 500) -> str:
        """One line for a prompt: ``shell {"command": "make deploy"} (admin)``."""
        args = json.dumps(dict(self.args), ensure_ascii=False, default=str)
        if len(args) > limit:
            args = args[:limit] + "…"
        category = f" ({self.category})" if self.category else ""
        via = f" called by {' -> '.join(self.chain)}" if self.chain else ""
        return f"{self.skill} {args}{category}{via}"

    def to_json(self) -> dict[str, Any]:
        return {
            "skill": self.skill,
            "args": dict(self.args),
            "category": self.category,
            "mode": self.mode,
            "rule": self.rule,
            "chain": list(self.chain),
        }


class _Skip:
    def __repr__(self) -> str:
        return "SKIP"


#: An approver's answer "do not make this call, go on without it" (see ``can_skip``).
SKIP: Any = _Skip()


@dataclass(frozen=True)
class Result:
    """An approver's answer "do not make this call: it returns ``value``" (see
    ``can_skip``): the human supplies the call's result (any JSON value, None included),
    which is checked against the skill's ``returns`` schema like a result it made."""

    value: Any

Approver = Callable[[ApprovalRequest], "Awaitable[bool | str | None] | bool | str | None"]

_session_approver: ContextVar[Approver | None] = ContextVar("agent_apps_approver", default=None)
_session_mode: ContextVar[str | None] = ContextVar("agent_apps_security_mode", default=None)
_defaults: weakref.WeakKeyDictionary[ContextManager, Approver] = weakref.WeakKeyDictionary()


@contextlib.contextmanager
def session(approver: Approver | None = None, *, mode: str | None = None) -> Iterator[None]:
    """Within this block (and tasks started in it), ask ``approver`` and, when
    ``security.mode`` is ``auto``, run in ``mode`` (``interactive``/``unattended``)."""
    tokens = (_session_approver.set(approver), _session_mode.set(mode))
    try:
        yield
    finally:
        _session_approver.reset(tokens[0])
        _session_mode.reset(tokens[1])


def session_mode() -> str | None:
    return _session_mode.get()


def set_approver(manager: ContextManager, approver: Approver | None) -> None:
    """The default approver of ``manager`` (None removes it)."""
    if approver is None:
        _defaults.pop(manager, None)
    else:
        _defaults[manager] = approver


def find_approver(manager: ContextManager) -> Approver | None:
    """Who to ask (see the module docstring), or None."""
    approver = _session_approver.get() or _defaults.get(manager)
    if approver is not None:
        return approver
    if _is_tty(sys.stdin) and _is_tty(sys.stderr):
        return TerminalApprover()
    return None


async def answer(approver: Approver, request: ApprovalRequest) -> tuple[str, Any]:
    """``(action, detail)``: action ``approve``, ``deny`` (detail: the reason, or None)
    or, when the request allows it, ``skip`` or ``result`` (detail: the supplied
    result); a failing approver is a denial, never a crash."""
    try:
        reply = approver(request)
        if inspect.isawaitable(reply):
            reply = await reply
    except Exception as exc:  # the human-facing side broke: refuse, say why
        return "deny", f"the approver failed ({type(exc).__name__}: {exc})"
    if reply is True:
        return "approve", None
    if reply is SKIP and request.can_skip:
        return "skip", None
    if isinstance(reply, Result):
        if request.can_skip:
            return "result", reply.value
        return "deny", "the approver supplied a result, which only a call from agent code can take"
    if isinstance(reply, str) and reply.strip():
        return "deny", reply.strip()
    return "deny", None


async def ask(approver: Approver, request: ApprovalRequest) -> tuple[bool, str | None]:
    """``(approved, reason)``; a failing approver is a denial, never a crash."""
    action, detail = await answer(approver, request)
    return action == "approve", detail if action == "deny" else None


class TerminalApprover:
    """Asks on the terminal: the request on stderr, ``y``/``yes`` on stdin approves,
    ``s``/``skip`` skips and ``=`` followed by JSON supplies the result (when the
    request allows them).

    Prompts are serialized (one question at a time even when an agent runs tools
    concurrently); the blocking read runs in a daemon thread, so a question nobody
    answers (the run was stopped meanwhile) never holds the process at its exit.
    """

    _lock = threading.Lock()

    def __init__(self, stdin: TextIO | None = None, stderr: TextIO | None = None) -> None:
        self.stdin = stdin or sys.stdin
        self.stderr = stderr or sys.stderr

    async def __call__(self, request: ApprovalRequest) -> Any:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()

        def prompt() -> None:
            try:
                reply = self._prompt(request)
            except BaseException as exc:  # handed to the waiting task, which denies
                loop.call_soon_threadsafe(_settle, future, None, exc)
            else:
                loop.call_soon_threadsafe(_settle, future, reply, None)

        threading.Thread(target=prompt, name="agent-apps-approval", daemon=True).start()
        return await future

    def _prompt(self, request: ApprovalRequest) -> bool | str:
        with TerminalApprover._lock:
            return self._prompt_locked(request)

    def _prompt_locked(self, request: ApprovalRequest) -> Any:
        skip = " / [s]kip / =JSON (its result)" if request.can_skip else ""
        self.stderr.write(
            f"\nagent-apps: allow {printable(request.summary())}?\n  [y]es / [N]o{skip} / or type a reason to refuse: "
        )
        self.stderr.flush()
        while True:
            reply = self.stdin.readline().strip()
            if reply.lower() in ("y", "yes"):
                return True
            if reply.lower() in ("", "n", "no"):
                return False
            if request.can_skip and reply.lower() in ("s", "skip"):
                return SKIP
            if not (request.can_skip and reply.startswith("=")):
                return reply
            try:
                return Result(json.loads(reply[1:]))
            except ValueError as exc:
                self.stderr.write(f"  not JSON ({exc}); again: ")
                self.stderr.flush()


def _settle(future: asyncio.Future[Any], reply: Any, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(reply)


def _is_tty(stream: Any) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (ValueError, OSError):
        return False
