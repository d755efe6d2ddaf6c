"""Authority: what whoever makes a call may do, and how work they leave behind runs
under it later (CONTRACT section 13, docs/security.md "Deferred work").

Work that runs later, elsewhere or by another name never has more authority than
whoever made it had when they made it. A schedule, an event subscription and a
registered skill each record an :class:`Authority`: the allowed-tools of the invocation
that made it (globs and argument constraints), whether that was agent code, and who it
was. Two functions apply it:

* :func:`check_call_as`, when the work is made: could its maker have made this exact
  call directly? Its allowed-tools must allow the target with these args; agent code
  may not call an internal skill, and a call to the agent skill meets the checks of
  :func:`check_untrusted_agent_args`. A target that takes a ref itself (it says which
  args in ``metadata.refs``: ``schedule-create``, ``skill-register``) has that ref
  checked the same way. The ref-taking skills refuse what fails (exit status 2, naming
  the arg).
* :func:`invoke_as`, when the work runs: the target is invoked as the child of an
  invocation that stands in for its maker (the maker's allowed-tools, and the untrusted
  flag when the maker was agent code), so the pipeline and the target check the call
  again, against the skills as they are then.

A skill that starts a sub-agent for its caller (the helpers ``delegate``, ``chain`` and
``consolidate``) gives it no more than that caller has (:func:`sub_agent_args`).

A call from agent code to the ``agent`` skill (directly, or through anything that calls
``agent`` for it later) is untrusted. Its ``config`` may set only
:data:`UNTRUSTED_CONFIG_KEYS`, its provider must be a provider skill, and its
``allowed_tools`` may be the caller's own or part of them (:func:`narrows`), or differ
when the caller's allowed-tools say so (a bare ``*``, or a constraint on
``agent(allowed_tools=...)``, which the pipeline checks like any constraint).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .allowed_tools import Spec, check_call, parse_specs
from .errors import ToolNotAllowed
from .skill import Skill, is_skill_name

if TYPE_CHECKING:
    from .context import Context
    from .manager import ContextManager

__all__ = [
    "AGENT",
    "DELEGATION",
    "UNTRUSTED_CONFIG_KEYS",
    "Authority",
    "Delegation",
    "check_call_as",
    "check_untrusted_agent_args",
    "invoke_as",
    "narrows",
    "sub_agent_args",
]

#: The agent skill: a call to it from agent code meets :func:`check_untrusted_agent_args`.
AGENT = "agent"
#: The internal that marks the invocation standing in for a maker (:func:`invoke_as`).
DELEGATION = "delegation"

#: The model config keys agent code may set when it starts a sub-agent. Everything else
#: (endpoints, credentials, regions, sandbox limits) stays with the user's config: agent
#: code must not redirect model traffic or lift its own limits.
#: ``sandbox`` and the turn and step limits are allowed because a nested agent never gets
#: more than its caller has (the agent's limits are the tighter of both): agent code can
#: only lower them.
UNTRUSTED_CONFIG_KEYS = frozenset(
    {"agent", "model_id", "max_turns", "max_steps", "temperature", "max_tokens", "top_p", "script", "stream", "sandbox"}
)


@dataclass(frozen=True)
class Authority:
    """What the maker of some deferred work could call when it made it.

    ``allowed_tools``: the maker's allowed-tools (None: every visible skill);
    ``untrusted``: the maker was agent code; ``by``: who it was, for records and errors
    (``agent code of NAME``, a skill's name); ``tenant``: the tenant the maker's run
    served, which the work serves too. Work made from Python or the command line
    has no Authority (None): it runs with the user's.
    """

    allowed_tools: str | None = None
    untrusted: bool = False
    by: str | None = None
    tenant: str | None = None

    @classmethod
    def of(cls, ctx: Context) -> Authority | None:
        """The authority of whoever called the skill running in ``ctx``; None when it was
        called from outside any skill. Work made by delegated work keeps the authority
        of the delegation's maker."""
        caller = ctx.parent
        if caller is None:
            return None
        delegation = caller.internals.get(DELEGATION)
        if isinstance(delegation, Delegation):
            return delegation.authority
        tenant = caller.run.tenant_id
        if caller.internals.get("untrusted"):
            scope = caller.nonlocals.get("agent") or {}
            by = f"agent code of {scope.get('skill_name') or caller.skill.name}"
            return cls(caller.skill.allowed_tools, True, by, tenant)
        return cls(caller.skill.allowed_tools, False, caller.skill.name, tenant)

    @classmethod
    def from_json(cls, data: Any) -> Authority | None:
        """The authority :meth:`to_json` wrote (None stays None)."""
        if data is None:
            return None
        if not isinstance(data, dict):
            raise ValueError(f"an authority is a JSON object, not {type(data).__name__}")
        allowed, by, tenant = data.get("allowed_tools"), data.get("by"), data.get("tenant")
        return cls(
            allowed if isinstance(allowed, str) else None,
            bool(data.get("untrusted")),
            by if isinstance(by, str) else None,
            tenant if isinstance(tenant, str) else None,
        )

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"allowed_tools": self.allowed_tools, "untrusted": self.untrusted, "by": self.by}
        if self.tenant is not None:
            data["tenant"] = self.tenant
        return data

    def stand_in(self) -> Skill:
        """The skill whose invocation stands in for the maker: its allowed-tools, and the
        name the pipeline's errors give the caller (``agent-code``, as for the code of an
        agent, or the maker skill's name). It is the host's own plumbing, as a callback
        ref's function is: no middleware wraps it and no policy judges it (the call it
        makes meets both), so it costs a few microseconds and counts as no call."""
        return Skill(
            name="agent-code" if self.untrusted else (self.by or "maker"),
            description=f"stands in for {self.by or 'the maker'} of deferred work",
            allowed_tools=self.allowed_tools,
            kind="callback",
            origin="authority",
            _main=_run_delegated,
        )


@dataclass(frozen=True)
class Delegation:
    """Deferred work running now: its maker's authority, and the call it makes."""

    authority: Authority
    ref: str
    args: dict[str, Any]


def check_call_as(
    authority: Authority, target: Skill, args: Mapping[str, Any] | None, skills: Mapping[str, Skill]
) -> None:
    """Raise :class:`ToolNotAllowed` unless the maker ``authority`` describes could call
    ``target`` with ``args`` directly (see the module docstring). ``skills`` is the
    catalog (by name). The error's ``path`` names the arg that is refused, relative to
    ``args`` (None: the call as a whole)."""
    caller = authority.stand_in()
    if authority.untrusted and ("meta-internal" in target.tags or target.kind == "callback"):
        raise ToolNotAllowed(caller.name, target.name, "agent code may not call internal skills (providers, executors)")
    check_call(caller, target, dict(args) if args is not None else None)
    if authority.untrusted and target.name == AGENT:
        check_untrusted_agent_args(caller, target, args or {}, skills)
    for ref_at, args_at in _refs(target):  # a ref the target will store or call in turn
        ref, inner = _arg(args, ref_at), _arg(args, args_at)
        nested = skills.get(ref) if isinstance(ref, str) else None
        if nested is None:  # not a skill: the target refuses it itself
            continue
        try:
            check_call_as(authority, nested, inner if isinstance(inner, Mapping) else {}, skills)
        except ToolNotAllowed as exc:
            where = f"{args_at}.{exc.path}" if exc.path else ref_at
            raise ToolNotAllowed(exc.caller, exc.callee, exc.reason, spec=exc.spec, path=where) from None


def check_untrusted_agent_args(
    caller: Skill, agent: Skill, args: Mapping[str, Any], skills: Mapping[str, Skill]
) -> None:
    """Refuse ``args`` for the agent skill ``agent`` that would let agent code running as
    ``caller`` widen what agent code can do. ``skills`` maps skill names to skills (the
    catalog), to check that ``config.agent`` names a provider and what ``allowed_tools``
    names. The error's ``path`` is the arg refused."""
    name = caller.name
    config = args.get("config") or {}
    refused = sorted(set(config) - UNTRUSTED_CONFIG_KEYS)
    if refused:
        raise ToolNotAllowed(
            name, agent.name, f"agent code may not set config {', '.join(refused)} (it may set "
            f"{', '.join(sorted(UNTRUSTED_CONFIG_KEYS))})", path=f"config.{refused[0]}"
        )
    provider = config.get("agent")
    if provider is not None:
        skill = skills.get(provider) if is_skill_name(provider) else None
        if skill is None or "provider" not in skill.tags:
            raise ToolNotAllowed(
                name, agent.name, f"config.agent {provider!r} is not a provider skill", path="config.agent"
            )
    requested = args.get("allowed_tools")
    own = caller.allowed_tools
    if requested is None or narrows(requested, own, skills):
        return
    specs = _specs(own) or ()
    widening_ok = any(s.glob == "*" for s in specs) or any(
        s.matches_name(agent) and any(k == "allowed_tools" for k, _ in s.constraints) for s in specs
    )
    if not widening_ok:
        raise ToolNotAllowed(
            name, agent.name, "agent code may start a sub-agent only with its own allowed-tools (or a part of them), "
            "unless its allowed-tools says which, as in agent(allowed_tools=file-*)", path="allowed_tools"
        )


def sub_agent_args(
    authority: Authority | None, agent: Skill, args: Mapping[str, Any], skills: Mapping[str, Skill]
) -> dict[str, Any]:
    """The args with which a skill starts a sub-agent (``agent``) for its maker
    ``authority`` (the helper skills delegate, chain and consolidate), checked so that
    the sub-agent never has more than the maker: its ``allowed_tools`` are the maker's
    when unset, and must narrow them when set (:func:`narrows`); agent code meets
    :func:`check_untrusted_agent_args` as if it started the agent itself. ``skills`` is
    the catalog. Without an authority (Python, the command line) ``args`` stand."""
    call = dict(args)
    if authority is None:
        return call
    maker = authority.stand_in()
    own = authority.allowed_tools
    if "allowed_tools" not in call:
        if own is not None:
            call["allowed_tools"] = own
    elif not narrows(call["allowed_tools"], own, skills):
        raise ToolNotAllowed(
            maker.name, agent.name, f"a sub-agent may have only its caller's allowed-tools ({own!r}) or a part of "
            "them", path="allowed_tools",
        )
    if authority.untrusted:
        check_untrusted_agent_args(maker, agent, call, skills)
    return call


def narrows(requested: str | None, own: str | None, skills: Mapping[str, Skill]) -> bool:
    """Whether allowed-tools ``requested`` allows no call that ``own`` refuses (None:
    every visible skill). Decided spec by spec, and conservatively: a spec of
    ``requested`` counts when a spec of ``own`` is a bare ``*``, the same glob, or a glob
    that matches the one skill it names exactly, with no constraint that it lacks."""
    if requested == own:
        return True
    mine = _specs(own)
    if mine and any(s.glob == "*" and not s.constraints for s in mine):
        return True
    if requested is None:  # every visible skill
        return False
    try:
        wanted = parse_specs(requested)
    except ValueError:  # the pipeline would say what is wrong with it
        return False
    return all(_covered(spec, mine, skills) for spec in wanted)


async def invoke_as(
    cm: ContextManager,
    authority: Authority | None,
    ref: str,
    args: dict[str, Any] | None,
    *,
    parent: Context | None = None,
    **options: Any,
) -> Any:
    """Run deferred work ``ref(args)`` under its maker's ``authority``: as the child of
    an invocation standing in for the maker (:meth:`Authority.stand_in`, untrusted when
    the maker was agent code), so every check a direct call from the maker meets applies
    now. ``parent``: the invocation it runs in (None: a top-level one, which ``options``,
    :meth:`ContextManager.invoke`'s, describe; a top-level one serves the maker's
    tenant). Without an authority (work made from Python or the command line) it is an
    ordinary invocation."""
    if authority is None:
        if parent is None:
            return await cm.invoke(ref, args, **options)
        return await cm._invoke(ref, args, parent, options)
    internals: dict[str, Any] = {**(options.get("internals") or {}), DELEGATION: Delegation(authority, ref, args or {})}
    if authority.untrusted:
        internals["untrusted"] = True
    options["internals"] = internals
    if parent is None:
        if authority.tenant is not None:
            options.setdefault("tenant", authority.tenant)
        return await cm.invoke(authority.stand_in(), {}, **options)
    return await cm._invoke(authority.stand_in(), {}, parent, options)


# -- internals -----------------------------------------------------------------------


async def _run_delegated(ctx: Context, args: dict[str, Any]) -> Any:
    """The stand-in's body: the delegated call, as its child."""
    delegation: Delegation = ctx.internals[DELEGATION]
    return await ctx.manager.invoke(delegation.ref, delegation.args)


def _refs(skill: Skill) -> list[tuple[str, str]]:
    """``metadata.refs`` of a skill that takes refs: each (dotted) arg holding a ref,
    with the one holding the args it is given."""
    refs = skill.metadata.get("refs")
    if not isinstance(refs, dict):
        return []
    return [(k, v) for k, v in refs.items() if isinstance(k, str) and isinstance(v, str)]


def _arg(args: Mapping[str, Any] | None, dotted: str) -> Any:
    """The value at a dotted path of ``args`` (None when it is not there)."""
    value: Any = args
    for key in dotted.split("."):
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def _specs(allowed: str | None) -> tuple[Spec, ...] | None:
    """The specs of a caller's ``allowed``: None for None (every visible skill), none at
    all for one that does not parse (the pipeline refuses every call under it)."""
    if allowed is None:
        return None
    try:
        return parse_specs(allowed)
    except ValueError:
        return ()


def _covered(spec: Spec, own: tuple[Spec, ...] | None, skills: Mapping[str, Skill]) -> bool:
    """Whether every call ``spec`` allows, ``own`` (None: every visible skill) allows."""
    if own is None:  # a glob other than * matches visible skills only; an exact name, what it names
        if spec.glob == "*":
            return False
        skill = skills.get(spec.glob)
        return not spec.exact or (skill is not None and not skill.hidden)
    for mine in own:
        if not set(mine.constraints) <= set(spec.constraints):
            continue
        if mine.glob in ("*", spec.glob):
            return True
        skill = skills.get(spec.glob) if spec.exact else None
        if skill is not None and mine.matches_name(skill):
            return True
    return False
