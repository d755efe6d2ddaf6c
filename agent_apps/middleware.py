"""Middleware: Koa's onion, for skills and for plain callables.

A middleware is ``async def mw(ctx, call_next)``; it may change args, short-circuit,
transform the result and catch errors, or halt the chain with a reason by raising
:class:`~agent_apps.errors.MiddlewareTermination` (the call fails with it, naming the
middleware). Middleware *skills* (``metadata.role:
middleware``) are adapted to that shape: their ``main(ctx, args)`` gets its own params
as ``args``, the served invocation as ``ctx.target`` (sharing ``ctx.locals``), and
continues with ``await ctx.manager.next()``. A *prompt* skill with that role is an
agent serving the call (middleware mode, see :mod:`agent_apps.agent.run`): its code
sees the call as ``target`` and runs it with ``await target.manager.next()``.

Order, outermost first: plugin middleware, config-cascade ``middleware``, the skill's
frontmatter ``middleware``, then call-time ``invoke(..., middleware=[...])``.

The entry ``$agent`` in any of these lists stands for *the agent being served*: for an
invocation of the ``agent`` skill (every agent run passes through one) it becomes that
agent's own middleware, ``model.middleware`` from the cascade of the skill the agent
serves (by default the bundled ``session``, which stores the run's trace); for every
other invocation it is nothing. The bundled defaults put it in the global list.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from ._syntax import parse_call
from .allowed_tools import check_call
from .context import Context, Finish
from .errors import (
    AgentAppsError,
    ArgsInvalid,
    MiddlewareError,
    MiddlewareTermination,
    SkillFailed,
    SkillLoadError,
    ToolNotAllowed,
)
from .skill import PROMPT_EXECUTOR, is_skill_name
from .validation import coerce_params, validate_args

if TYPE_CHECKING:
    from .manager import ContextManager
    from .skill import Skill

__all__ = [
    "AGENT",
    "CallNext",
    "MiddlewareFn",
    "applies",
    "check_untrusted_middleware",
    "compose",
    "expand_agent",
    "level_of",
    "served_agent",
    "served_middleware",
    "skill_middleware",
]

CallNext = Callable[..., Awaitable[Any]]
MiddlewareFn = Callable[[Context, CallNext], Awaitable[Any]]
Terminal = Callable[[Context], Awaitable[Any]]

#: The sentinel entry of middleware lists: the agent being served.
AGENT = "$agent"
#: The skill every agent run is an invocation of.
_AGENT_SKILL = "agent"


def compose(middleware: Sequence[MiddlewareFn]) -> Callable[[Context, Terminal], Awaitable[Any]]:
    """The whole onion. ``call_next(args=None)`` runs the next layer (``args`` replaces
    the invocation's args, validated again); calling it twice is an error, and so is
    neither calling it nor returning a result (use ``finish(None)`` for a null).

    ``onion(ctx, terminal)`` is the outermost layer's coroutine itself, and each
    ``call_next`` awaits the next layer (or the terminal) directly: a call pays one
    frame per middleware, no dispatcher between them (sandboxed agent code makes
    thousands of calls)."""
    layers = tuple(middleware)

    def run(ctx: Context, terminal: Terminal) -> Awaitable[Any]:
        return _layer(layers, 0, ctx, terminal) if layers else terminal(ctx)

    return run


async def _layer(layers: tuple[MiddlewareFn, ...], index: int, ctx: Context, terminal: Terminal) -> Any:
    """Run middleware ``layers[index]`` around the layers inside it."""
    mw = layers[index]
    state: list[Any] = []  # [result of the inner layers] once call_next ran

    async def call_next(args: dict[str, Any] | None = None) -> Any:
        if state:
            raise MiddlewareError(_name(mw), "called ctx.manager.next() twice")
        state.append(None)
        if args is not None:
            ctx.args = validate_args(ctx.skill, args)
        inner = index + 1
        state[0] = await (_layer(layers, inner, ctx, terminal) if inner < len(layers) else terminal(ctx))
        return state[0]

    try:
        result = await mw(ctx, call_next)
    except Finish as done:
        return done.value
    except MiddlewareTermination as halt:
        halt.name(_name(mw))  # the first layer it passes raised it (inner layers name their own)
        raise
    if result is None:
        if not state:
            raise MiddlewareError(
                _name(mw),
                "returned without calling ctx.manager.next() or returning a result "
                "(to short-circuit with null, use ctx.manager.finish(None))",
            )
        return state[0]
    return result


def skill_middleware(cm: ContextManager, ref: str | tuple[str, dict[str, Any]]) -> MiddlewareFn:
    """Adapt a middleware skill, written ``name`` or ``name(key=value)``, to a callable."""
    if isinstance(ref, tuple):
        name, raw = ref
    else:
        try:
            name, pairs = parse_call(ref)
        except ValueError as exc:
            raise AgentAppsError(f"middleware {exc}") from None
        raw = None
    skill = cm.get(name)
    if not skill.is_middleware:
        raise SkillLoadError(
            f"{name!r} is used as middleware but lacks 'metadata: {{role: middleware}}'",
            path=skill.path or name,
            line=skill.line,
            skill=name,
        )
    params = validate_args(skill, raw if raw is not None else coerce_params(skill.params, pairs))

    prompt = skill.kind == "prompt"

    async def run_middleware(target: Context, call_next: CallNext) -> Any:
        if prompt and _made_by(target, skill):
            return await call_next()  # a middleware agent does not serve its own calls (no loop)
        # An agent keeps its state (ctx.locals["agent"], its nonlocal scope) to itself:
        # the served call may run an agent of its own.
        ctx = Context(
            target._cm,
            skill,
            params,
            target.parent,
            signal=target.signal,
            target=target,
            locals=None if prompt else target.locals,
        )
        ctx._nonlocals = target.nonlocals.new_child() if prompt else target.nonlocals
        ctx._next = call_next
        try:
            if prompt:
                # What the agent ends with is the call's result, even null (compose
                # returns a Finish value as is).
                raise Finish(await cm._invoke(PROMPT_EXECUTOR, {}, ctx, {"target": ctx, "system": True}))
            result = skill.main(ctx, params)
            if inspect.isawaitable(result):
                result = await result
            return result
        except (AgentAppsError, Finish):
            raise
        except Exception as exc:
            raise SkillFailed(skill.name, f"{type(exc).__name__}: {exc}") from exc
        finally:
            ctx._close()

    run_middleware.__qualname__ = run_middleware.__name__ = skill.name
    run_middleware.level = skill.level  # type: ignore[attr-defined]
    return run_middleware


def level_of(fn: MiddlewareFn) -> str:
    """``tool``, ``model`` or ``run`` (a plain callable may set a ``level`` attribute)."""
    return str(getattr(fn, "level", "tool"))


def applies(fn: MiddlewareFn, skill: Skill) -> bool:
    """Whether ``fn`` wraps invocations of ``skill``: tool-level middleware wraps every
    invocation, run-level middleware only agent runs (invocations of ``agent``), and
    model-level middleware none (it wraps the model calls of agent runs instead)."""
    level = level_of(fn)
    return level == "tool" or (level == "run" and skill.name == _AGENT_SKILL)


def served_middleware(cm: ContextManager, served: Context, level: str) -> list[MiddlewareFn]:
    """The middleware of ``level`` named for ``served`` (the invocation an agent serves:
    a prompt skill's, or the skill that started the agent) in its own lists (plugin,
    manager, cascade, frontmatter) and at its call: they reach the agent runs it serves."""
    fns: list[MiddlewareFn] = list(served.skill._cache.get("middleware_all") or ())
    call = served.internals.get("middleware")
    if call:
        fns += [cm._middleware_fn(ref) for ref in call if ref != AGENT]
    return [fn for fn in fns if level_of(fn) == level]


def _made_by(target: Context, skill: Skill) -> bool:
    """Whether ``target`` is a call made, at any depth, by a run of middleware ``skill``."""
    node = target.parent
    while node is not None:
        if node.target is not None and node.skill.name == skill.name and node.skill.is_middleware:
            return True
        node = node.parent
    return False


def check_untrusted_middleware(cm: ContextManager, caller: Context, callee: Skill, refs: Sequence[Any]) -> None:
    """Call-time middleware named by agent code (``invoke(..., middleware=[...])``
    under the untrusted flag) is checked like the call itself: each entry is a
    ``name`` or ``name(key=value)`` string naming, by bare name, a middleware skill
    that is not internal, whose params validate, and that the caller's allowed-tools
    allow with those params (hidden ones only when named, argument constraints
    included)."""
    who = caller.skill.name
    for index, ref in enumerate(refs):
        where = f"middleware[{index}]"
        if not isinstance(ref, str):
            raise ArgsInvalid(callee.name, where, f"a middleware is named by a string, not {type(ref).__name__}")
        try:
            name, pairs = parse_call(ref)
        except ValueError as exc:
            raise ArgsInvalid(callee.name, where, f"not 'name' or 'name(key=value)': {exc}") from None
        if not is_skill_name(name):
            raise ToolNotAllowed(who, ascii(name), "agent code may only name middleware by bare name ([a-z0-9-]+)")
        skill = cm.get(name)
        if "meta-internal" in skill.tags:
            raise ToolNotAllowed(who, name, "agent code may not use internal skills as middleware")
        if not skill.is_middleware:
            raise ArgsInvalid(callee.name, where, f"{name!r} is not a middleware skill (metadata.role: middleware)")
        check_call(caller.skill, skill, validate_args(skill, coerce_params(skill.params, pairs)))


def served_agent(into: dict[str, Any]) -> MiddlewareFn:
    """A call-time middleware that copies into ``into`` what the agent serving the call
    (if one did) left in ``ctx.locals["agent"]``: its ``status``, ``message``, turns and
    steps, which tell a partial result (``max_turns``) from a finished one."""

    async def watch(ctx: Context, call_next: CallNext) -> Any:
        try:
            return await call_next()
        finally:
            into.update(ctx.locals.get("agent") or {})

    return watch


def _name(mw: Callable[..., Any]) -> str:
    return getattr(mw, "__name__", repr(mw))


def expand_agent(
    cm: ContextManager, skill: Skill, refs: list[Any], *, done: Sequence[MiddlewareFn] = ()
) -> list[Any]:
    """``refs`` with the first ``$agent`` made the agent middleware (for the ``agent``
    skill, unless ``done`` has it already) and every other ``$agent`` dropped."""
    if not any(isinstance(ref, str) and ref == AGENT for ref in refs):
        return refs
    wanted = skill.name == _AGENT_SKILL and not any(getattr(fn, "agent_sentinel", False) for fn in done)
    out = []
    for ref in refs:
        if isinstance(ref, str) and ref == AGENT:
            if wanted:
                out.append(_agent_middleware(cm))
                wanted = False
        else:
            out.append(ref)
    return out


def _agent_middleware(cm: ContextManager) -> MiddlewareFn:
    """Runs ``model.middleware`` of the skill the agent serves around the agent run.

    Resolved per served skill (a prompt skill's ``metadata.model.middleware`` applies
    to its agent) and cached on it; the call's own config never adds middleware.
    """

    async def agent(ctx: Context, call_next: CallNext) -> Any:
        served = ctx.target or ctx.parent or ctx
        cache = served.skill._cache
        fns: Any = cache.get("agent_middleware")
        if fns is None:
            refs = cm.config_for(served.skill).values.get("model", {}).get("middleware") or []
            fns = [cm._middleware_fn(ref) for ref in refs if ref != AGENT]
            fns = cache["agent_middleware"] = [fn for fn in fns if level_of(fn) != "model"]
        # run-level middleware named for the served skill or its call wraps its agent run
        # too (unless the agent's own onion has it already: global lists)
        own = ctx.skill._cache.get("middleware") or ()
        carried = [fn for fn in served_middleware(cm, served, "run") if fn not in own] if served is not ctx else []
        chain = carried + fns
        if not chain:
            return await call_next()
        return await compose(chain)(ctx, lambda _ctx: call_next())

    agent.agent_sentinel = True  # type: ignore[attr-defined]
    return agent
