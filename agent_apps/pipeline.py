"""The pipeline: every invocation passes through these stages, in this order.

::

    1. resolve        ref -> Skill (names, file://, inline://, callback refs, anonymous
                      definitions); agent code (the "untrusted" flag) may only use
                      bare names
    2. depth          a cycle of skills calling each other stops with LimitExceeded
    3. allowed-tools  the caller's allowed-tools must allow this callee with these args;
                      agent code may never call internal (meta-internal) skills, and
                      the call-time middleware it names are checked the same way
    4. args           JSON Schema (Draft 2020-12) validation; schema defaults applied
    5. middleware     the onion: plugin, cascade, frontmatter, then call-time middleware
    6. skill          main(ctx, args), or the executor for a prompt skill
    7. result         JSON-serializable and valid against metadata.returns

Errors leave every stage as :class:`~agent_apps.errors.AgentAppsError` subclasses
tagged with the depth they happened at; anything else a skill raises becomes
:class:`~agent_apps.errors.SkillFailed` with the original as ``__cause__``.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
from typing import TYPE_CHECKING, Any

from . import tracing
from .allowed_tools import check_call
from .attachments import AttachmentInvalid, load
from .context import Context, Finish, Signal
from .errors import AgentAppsError, ArgsInvalid, LimitExceeded, SkillFailed, ToolNotAllowed
from .middleware import check_untrusted_middleware
from .skill import PROMPT_EXECUTOR
from .validation import validate_args, validate_result

if TYPE_CHECKING:
    from .manager import ContextManager
    from .run_record import RunRecord
    from .skill import Skill

__all__ = ["OPTIONS", "invoke"]

#: Keyword options ``invoke()`` accepts.
OPTIONS = frozenset(
    {
        "middleware", "config", "target", "internals", "nonlocals", "signal", "system", "session", "read_only",
        "run", "attachments", "context", "tenant",
    }
)

#: Skill kinds whose code comes from the caller, so the caller's allowed-tools (a list
#: of *names* it may call) does not apply to them.
_CALLER_CODE = frozenset({"anonymous", "callback"})

async def invoke(cm: ContextManager, ref: Any, args: Any, parent: Context | None, options: dict[str, Any]) -> Any:
    """Run one invocation of ``ref`` with ``args`` as a child of ``parent``."""
    if not OPTIONS.issuperset(options):
        raise TypeError(f"invoke() got unknown options: {', '.join(sorted(options.keys() - OPTIONS))}")
    if options.get("read_only") and not options.get("session"):
        raise ValueError("read_only=True applies to a session: give session=ID too")
    tenant = options.get("tenant")
    if tenant is not None:
        _check_tenant(tenant, parent, options.get("run"))
    depth = 0 if parent is None else parent.depth + 1
    config, middleware = options.get("config"), options.get("middleware")
    try:
        # 1. Resolve the ref.
        skill = cm._resolve(ref, parent)
        # 2. Bound the depth.
        if depth > cm.max_depth:
            chain = " -> ".join([*parent.chain[-6:], skill.name]) if parent else skill.name
            raise LimitExceeded(
                f"invocation depth limit ({cm.max_depth}) reached: ... {chain} (is there a cycle?)",
                skill=skill.name,
            )
        # 3. The caller's allowed-tools.
        if parent is not None and skill.kind not in _CALLER_CODE and not options.get("system"):
            check_call(parent.skill, skill, args)
            if parent.internals.get("untrusted") and "meta-internal" in skill.tags:
                raise ToolNotAllowed(
                    parent.skill.name, skill.name, "agent code may not call internal skills (providers, executors)"
                )
        if parent is not None and middleware and parent.internals.get("untrusted"):
            check_untrusted_middleware(cm, parent, skill, middleware)
        # 4. Args (and the keys of the call's config, and the attachments).
        args = validate_args(skill, args)
        if config:
            cm.check_call_config(config)
        given = options.get("attachments")
        attachments = _attachments(cm, skill, parent, given) if given is not None else ()
    except AgentAppsError as exc:
        _tag(exc, depth)
        raise

    signal: Signal | None = options.get("signal")
    ctx = Context(
        cm,
        skill,
        args,
        parent,
        signal=signal.child() if signal is not None and parent is not None else signal,
        target=options.get("target"),
        internals=options.get("internals"),
    )
    if config:
        ctx.internals["config"] = config
    if options.get("session"):  # the agent this invocation serves continues that session
        ctx.internals["session"] = options["session"]
        if options.get("read_only"):  # ... off the record: it sees the session and writes nothing to it
            ctx.internals["read_only"] = True
    if attachments:  # the agent this invocation serves gets them with the user's message
        ctx.internals["attachments"] = attachments
    if options.get("context") is not None:  # the agent this invocation serves gets it as a layer
        ctx.internals["context"] = options["context"]
    if tenant is not None and parent is None:  # the run's record, made on first use, serves it
        ctx.internals["tenant"] = tenant
    if options.get("nonlocals"):
        ctx.nonlocals.update(options["nonlocals"])
    if middleware:  # agent middleware named here reaches the agent it serves
        ctx.internals["middleware"] = middleware
    ctx.span = tracing.start_invocation(ctx)  # None unless OpenTelemetry is set up
    if options.get("run") is not None:  # continue a run recorded before (the scheduler's, a resumed one)
        ctx.continue_run(options["run"])
    error: BaseException | None = None
    try:
        # 5 and 6. The middleware onion around the skill.
        onion = cm._onion(skill, middleware)
        result = await (onion(ctx, _run_skill) if onion is not None else _run_skill(ctx))
        # 7. The result.
        validate_result(skill, result)
        return result
    except AgentAppsError as exc:
        _tag(exc, depth)
        error = exc
        raise
    except asyncio.CancelledError as exc:
        # The task was cancelled (Ctrl-C, a timeout, a client's cancel): tell whoever
        # listens on this invocation's signal (threads, sandboxes, providers) before
        # the signal is detached below.
        if ctx._signal is not None:
            ctx._signal.cancel("cancelled")
        error = exc
        raise
    finally:
        if ctx.span is not None:
            tracing.end(ctx.span, error)
        ctx._close()


async def _run_skill(ctx: Context) -> Any:
    """Stage 6: run the skill's code and turn what it raises into typed errors."""
    skill = ctx.skill
    try:
        if skill.kind == "prompt":
            return await ctx._cm._invoke(PROMPT_EXECUTOR, {}, ctx, {"target": ctx, "system": True})
        main = skill.main
        if _is_async(skill, main):
            return await main(ctx, ctx.args)
        result = await _in_thread(ctx, main)
        if inspect.isawaitable(result):  # a plain def that returned a coroutine
            result = await result
        return result
    except Finish as done:
        return done.value
    except AgentAppsError:
        raise
    except Exception as exc:
        raise SkillFailed(skill.name, f"{type(exc).__name__}: {exc}") from exc


def _is_async(skill: Skill, main: Any) -> bool:
    is_async = skill._cache.get("async")
    if is_async is None:
        is_async = skill._cache["async"] = inspect.iscoroutinefunction(main)
    return bool(is_async)


async def _in_thread(ctx: Context, main: Any) -> Any:
    """Plain ``def`` skills run in a worker thread, so blocking code never stalls the
    event loop (as Starlette does for sync endpoints); ``ctx.manager.invoke_sync``
    calls back into the loop from there."""
    loop = asyncio.get_running_loop()
    ctx._cm._loop_for_threads = loop
    call = functools.partial(contextvars.copy_context().run, main, ctx, ctx.args)
    return await loop.run_in_executor(None, call)


def _attachments(cm: ContextManager, skill: Skill, parent: Context | None, given: Any) -> list[dict[str, Any]]:
    """The ``attachments=`` option as checked media parts (docs/agent.md,
    "Attachments"); a file is read now, so its bytes are what the run keeps. Only a
    trusted caller may name files."""
    files = parent is None or not parent.internals.get("untrusted")
    try:
        return load(given, files=files, cwd=cm.cwd)
    except AttachmentInvalid as exc:
        raise ArgsInvalid(skill.name, exc.path, str(exc)) from None


def _check_tenant(tenant: Any, parent: Context | None, run: RunRecord | None) -> None:
    """Refuse a ``tenant=`` that is not an id, or that would change the tenant of a run
    under way: it is set at the run's top only, and everything below serves it (the
    authority rules' principle: nothing below can claim more than its caller had)."""
    from .run_record import id_problem  # here: an invocation without a tenant never loads run records

    problem = id_problem(tenant, "tenant id")
    if problem:
        raise ValueError(f"tenant: {problem}")
    if parent is not None:
        held = parent.run.tenant_id
        if tenant != held:
            raise ValueError(
                f"tenant={tenant!r}: a nested invocation serves its run's tenant ({held!r}); "
                "only the top-level invoke() sets it"
            )
    elif run is not None and run.tenant_id is not None and tenant != run.tenant_id:
        raise ValueError(f"tenant={tenant!r}: run {run.run_id} serves tenant {run.tenant_id!r}")


def _tag(exc: AgentAppsError, depth: int) -> None:
    if exc.depth is None:
        exc.depth = depth
