"""The permission middleware: every invocation passes the policy before it runs.

It is a plain middleware callable (cheap: no extra Context per call) that the tools
plugin contributes globally; the ``permissions`` middleware skill wraps the same
function for users who prefer to switch it on in config (``middleware:
[permissions]``). Whichever runs first marks the invocation (in a context variable,
so nothing shows in the skill's ``ctx``), so it is checked once.

A denial is a :class:`~agent_apps.tools.errors.PermissionDenied` raised before the
skill runs: the agent gets it as the tool's error and can choose something else.

A skill with ``metadata.shell_arg`` (``shell``) is checked as an ``admin`` call when
that arg is a destructive shell line (destructive.py): the policy then asks, or refuses
unattended, instead of allowing a ``write``.

An invocation may carry an *approval gate* of its own (``internals["approval_gate"]``,
an ``async gate(request) -> (action, detail) | None``): the agent sets one on each host
call from agent code, which answers ``ask`` from a resumed run's recorded decision,
asks with ``skip`` and ``result`` as more answers, or checkpoints the run when nobody
can be asked (docs/durability.md). ``None`` from the gate: nobody could be asked. A
``result`` answer (the human supplied the call's result) is returned by this
middleware in place of the call, and marks the invocation ``internals["answered"]``.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..context import Finish
from . import approval
from .errors import CallAnswered, CallSkipped, PermissionDenied
from .policy import Decision, category_of, decide, resolve_mode
from .settings import security_for

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from ..context import Context
    from ..middleware import CallNext
    from ..skill import Skill

__all__ = ["check_permission", "permission_middleware", "permit"]

#: The id of the invocation whose check already passed, while its inner layers run.
_checked: ContextVar[str | None] = ContextVar("agent_apps_permission_checked", default=None)


async def permission_middleware(ctx: Context, call_next: CallNext) -> Any:
    """Check ``ctx`` (the served invocation) against the policy, then continue."""
    if _checked.get() == ctx.id:
        return await call_next()
    try:
        await check_permission(ctx)
    except CallAnswered as answered:  # the human supplied the result: the call is not made
        ctx.internals["answered"] = True
        raise Finish(answered.result) from None  # the onion's short cut, for a None result too
    token = _checked.set(ctx.id)
    try:
        return await call_next()
    finally:
        _checked.reset(token)


async def check_permission(ctx: Context) -> None:
    """Raise :class:`PermissionDenied` unless the policy (or a human) allows ``ctx``."""
    skill = ctx.skill
    if skill.kind == "callback" or skill.is_middleware:
        return
    security = security_for(ctx)
    mode = resolve_mode(security, approval.session_mode())
    decision = _skill_decision(skill, security, mode)
    shell_arg = skill.metadata.get("shell_arg")
    if shell_arg is not None and decision.category != "admin":
        decision = _shell_decision(ctx, ctx.args.get(shell_arg), security, mode) or decision
    if decision.action != "allow":  # the caller's chain and a copy of the args only for a refusal or a question
        chain = tuple(ctx.parent.chain) if ctx.parent is not None else ()
        await _enforce(ctx, skill.name, decision, dict(ctx.args), chain, ctx.internals.get("approval_gate"))


#: Where :func:`_skill_decision` keeps a skill's decisions (in ``skill._cache``).
_DECISIONS_KEY = "agent_apps.tools.decisions"


def _skill_decision(skill: Skill, security: dict[str, Any], mode: str) -> Decision:
    """:func:`decide` for invoking ``skill``, memoized on it per mode for as long as
    ``security`` is the same object: :func:`security_for` hands out one cached mapping
    per skill until the manager reloads (a call layer makes a new one per call, which
    starts a new memo), so re-walking the policy's globs on every call of a hot skill
    (a sandbox calling tools in a loop) would only find the same answer again."""
    memo: tuple[dict[str, Any], dict[str, Decision]] | None = skill._cache.get(_DECISIONS_KEY)
    if memo is None or memo[0] is not security:  # the memo holds ``security``, so its id is not reused
        memo = skill._cache[_DECISIONS_KEY] = (security, {})
    decision = memo[1].get(mode)
    if decision is None:
        decision = memo[1][mode] = decide(skill.name, category_of(skill.metadata), security, mode)
    return decision


def _shell_decision(ctx: Context, line: Any, security: dict[str, Any], mode: str) -> Decision | None:
    """The decision for a call whose shell line is destructive (destructive.py): that
    of an ``admin`` call of the skill; None for any other line (the skill's own
    category holds) and for a line the shell blocklist refuses anyway."""
    from .blocklist import blocked
    from .destructive import destructive

    if not isinstance(line, str) or blocked(line) is not None:
        return None
    why = destructive(line, _exists_from(ctx))
    if why is None:
        return None
    decision = decide(ctx.skill.name, "admin", security, mode)
    return replace(decision, rule=f"{decision.rule} (a destructive shell line: {why})")


def _exists_from(ctx: Context) -> Callable[[str], bool]:
    """Whether a path of a shell line names an existing file, from where the command
    runs: the call's ``cwd`` arg, else the workspace (as the shell tool resolves them)."""
    from . import path_policy

    def exists(path: str) -> bool:
        target = Path(path).expanduser()
        if not target.is_absolute():
            base = Path(path_policy(ctx).workspace)
            where = ctx.args.get("cwd")
            target = (base / where if isinstance(where, str) else base) / target
        return target.is_file()

    return exists


async def permit(
    ctx: Context,
    name: str,
    category: str | None,
    args: dict[str, Any],
    *,
    chain: tuple[str, ...] = (),
    security: dict[str, Any] | None = None,
    gate: Callable[[approval.ApprovalRequest], Awaitable[tuple[str, Any] | None]] | None = None,
) -> None:
    """Raise :class:`PermissionDenied` unless the policy (or a human) allows calling
    ``name`` (of ``category``) with ``args``, seen from ``ctx``. Also for actions that
    are not skills: an ACP agent CLI asking to run one of its own tools. ``gate`` is the
    invocation's approval gate (see above), which then finds the approver itself; a
    ``skip`` answer raises :class:`CallSkipped`."""
    security = security_for(ctx) if security is None else security
    decision = decide(name, category, security, resolve_mode(security, approval.session_mode()))
    if decision.action != "allow":
        await _enforce(ctx, name, decision, args, chain, gate)


async def _enforce(
    ctx: Context,
    name: str,
    decision: Decision,
    args: dict[str, Any],
    chain: tuple[str, ...],
    gate: Callable[[approval.ApprovalRequest], Awaitable[tuple[str, Any] | None]] | None,
) -> None:
    """Act on a decision that is not ``allow``: refuse (``deny``), or ask the gate or
    the approver (``ask``) and raise unless they approve."""
    category, mode = decision.category, decision.mode
    event = {"type": "permission", "skill": name, "category": category, "mode": mode, "rule": decision.rule}
    if decision.action == "deny":
        ctx.manager.emit("security", {**event, "decision": "deny"})
        hint = "" if mode == "interactive" else "; a job can allow it by listing it in security.policy.unattended.allow"
        raise PermissionDenied(name, f"not permitted in {mode} mode{hint}", rule=decision.rule, resource=name)
    request = approval.ApprovalRequest(name, args, category, mode, decision.rule, chain, can_skip=gate is not None)
    if gate is not None:
        verdict = await gate(request)
    else:
        approver = approval.find_approver(ctx._cm)
        verdict = None if approver is None else await approval.answer(approver, request)
    if verdict is None:
        ctx.manager.emit("security", {**event, "decision": "deny", "reason": "no approver"})
        raise PermissionDenied(
            name,
            f"needs human approval in {mode} mode and no approver is available "
            "(no terminal, no approval.session() or set_approver())",
            rule=decision.rule,
            resource=name,
        )
    action, detail = verdict
    outcome = {"approve": "approved", "skip": "skipped", "result": "answered"}.get(action, "refused")
    reason = detail if action == "deny" else None
    ctx.manager.emit("security", {**event, "decision": outcome, "reason": reason})
    if action == "skip":
        raise CallSkipped(name, rule=decision.rule)
    if action == "result":
        raise CallAnswered(name, detail, rule=decision.rule)
    if action != "approve":
        raise PermissionDenied(
            name,
            "refused by the approver" + (f": {reason}" if reason else ""),
            rule=decision.rule,
            resource=name,
        )
