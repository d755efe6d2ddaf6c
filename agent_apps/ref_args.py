"""Skills that take refs as arguments: ``schedule-create``, ``event-subscribe``,
``skill-register``. The rules for those refs live here, in one place.

Agent code may *invoke* skills by bare name only (the sandbox ref rule). A ref passed
*as an argument* is not an invoke target, so it is checked here instead, before anything
is stored or registered:

1. A ref is a bare skill name (``[a-z0-9-]+``), from every caller: a stored ref outlives
   the code that made it and is resolved later, maybe in another process on another
   search path, where ``file://``, ``inline://`` and ``callback://`` refs mean nothing or
   something else. (The skills' params say so with a pattern, so the pipeline refuses
   such a ref before the skill runs.)
2. It names a skill that exists now, and the args it will be invoked with validate
   against that skill's params now (errors name the arg path).
3. Its maker could make that call directly (:func:`~agent_apps.authority.check_call_as`):
   the caller's allowed-tools allow the ref with those args, agent code passes no
   internal skill, and a call to ``agent`` asks for no more than agent code may. The
   caller's :class:`~agent_apps.authority.Authority` is stored with the work, which runs
   under it (:func:`~agent_apps.authority.invoke_as`).
4. Which refs may be passed at all can be narrowed further by allowed-tools argument
   constraints on the ref-taking skill, ``schedule-create(ref=my-*)``: the pipeline
   checks them like any constraint, before the skill runs.

``skill-register`` makes a skill that can be called at once: a definition cannot do
more than its registrant could (:func:`registered_skill`).
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from .authority import UNTRUSTED_CONFIG_KEYS, Authority, check_call_as, invoke_as, narrows
from .errors import ArgsInvalid, SkillLoadError, SkillNotFound, ToolNotAllowed
from .frontmatter import skill_from_frontmatter
from .skill import Skill, is_skill_name
from .validation import check_schemas, validate_args

if TYPE_CHECKING:
    from .context import Context

__all__ = ["RESERVED_PREFIXES", "check_ref", "registered_skill"]

#: Names ``skill-register`` refuses besides those of existing skills: the agent and its
#: providers' namespace (``model.agent`` picks a provider by name).
RESERVED_PREFIXES = ("agent-",)
RESERVED_NAMES = ("agent",)


def check_ref(
    ctx: Context,
    ref: str,
    args: dict[str, Any],
    *,
    arg: str = "ref",
    args_at: str = "args",
    partial: bool = False,
    validate: bool = True,
) -> Skill:
    """The skill ``ref`` names, checked for the caller of the skill running in ``ctx``
    (rules 1-3 of the module docstring). ``args`` are what it will be invoked with
    (``partial``: the rest is given at call time; ``validate=False``: they vary, so only
    the authority check sees them); ``arg`` and ``args_at`` name the ref's and the
    args' places in ``ctx``'s args, for errors."""
    taker = ctx.skill.name
    cm = ctx.manager.context_manager
    if not is_skill_name(ref):
        raise ArgsInvalid(taker, arg, f"{ref!r} is not a bare skill name ([a-z0-9-]+): refs with a scheme or a path "
                          "are refused here")
    try:
        skill = cm.get(ref)
    except SkillNotFound as exc:
        hint = f" (did you mean {', '.join(exc.suggestions)}?)" if exc.suggestions else ""
        raise ArgsInvalid(taker, arg, f"no skill named {ref!r}{hint}") from None
    authority = Authority.of(ctx)
    if authority is not None:  # as the pipeline does: who may call it, then the args
        try:
            check_call_as(authority, skill, args, cm.catalog.skills)
        except ToolNotAllowed as exc:
            where = f"{args_at}.{exc.path}" if exc.path else arg
            raise ToolNotAllowed(exc.caller, exc.callee, exc.reason, spec=exc.spec, path=where) from None
    if validate:
        _validate_for(taker, skill, args, args_at, partial=partial)
    return skill


def registered_skill(ctx: Context, name: str, definition: dict[str, Any]) -> Skill:
    """The skill a ``skill-register`` definition describes, checked (docs/scheduling.md):

    * ``{"ref", "args"?, ...}``: an existing skill with fixed args. Its params are the
      ref's without the fixed ones; the caller must be allowed to call the ref with them,
      and every call of it runs under the caller's authority.
    * ``{"body", "description", ...}``: a prompt skill. Its allowed-tools are at most
      the caller's, and ``model`` may only set the keys agent code may set for a
      sub-agent.
    """
    taker = ctx.skill.name
    if name in RESERVED_NAMES or name.startswith(RESERVED_PREFIXES):
        raise ArgsInvalid(taker, "name", f"{name!r}: the names agent and agent-* are kept for the agent and its "
                          "providers")
    has_body, has_ref = definition.get("body") is not None, definition.get("ref") is not None
    if has_body == has_ref:
        raise ArgsInvalid(taker, "definition", "give either 'body' (a prompt skill: the agent's instructions) or "
                          "'ref' (an existing skill with fixed 'args'), " + ("not both" if has_body else "one of them"))
    if has_ref:
        return _alias(ctx, name, definition)
    if "args" in definition:
        raise ArgsInvalid(taker, "definition.args", "fixed args go with 'ref', not with a prompt skill's 'body'")
    return _prompt(ctx, name, definition)


# -- internals -----------------------------------------------------------------------


def _validate_for(taker: str, skill: Skill, args: dict[str, Any], where: str, *, partial: bool = False) -> None:
    """Validate ``args`` for ``skill``; an error names ``taker``'s arg path."""
    target = skill
    if partial and skill.params is not None:  # fixed args: the rest is given at call time
        target = Skill(name=skill.name, params={**skill.params, "required": []})
    try:
        validate_args(target, args)
    except ArgsInvalid as exc:
        path = f"{where}.{exc.path}" if exc.path else where
        raise ArgsInvalid(taker, path, f"{exc.problem} (args of {skill.name!r})") from None


def _alias(ctx: Context, name: str, definition: dict[str, Any]) -> Skill:
    taker = ctx.skill.name
    ref, fixed = definition["ref"], dict(definition.get("args") or {})
    for key in ("body", "params", "returns", "allowed-tools", "model"):
        if key in definition:
            raise ArgsInvalid(taker, f"definition.{key}", f"a definition with 'ref' takes the ref's {key}; "
                              "give only ref, args, description and tags")
    target = check_ref(ctx, ref, fixed, arg="definition.ref", args_at="definition.args", partial=True)
    authority = Authority.of(ctx)
    cm = ctx.manager.context_manager
    params = copy.deepcopy(target.params)
    if params is not None and fixed:
        props = params.get("properties") or {}
        params["properties"] = {k: v for k, v in props.items() if k not in fixed}
        params["required"] = [k for k in params.get("required", ()) if k not in fixed]

    async def main(actx: Any, args: dict[str, Any]) -> Any:
        for key in args.keys() & fixed.keys():
            raise ArgsInvalid(name, key, f"is fixed by this registered skill (to {fixed[key]!r})")
        return await invoke_as(cm, authority, ref, {**args, **fixed}, parent=actx)

    metadata: dict[str, Any] = {"tags": list(definition.get("tags") or ())}
    if target.returns is not None:
        metadata["returns"] = target.returns
    description = definition.get("description") or f"{target.description} (registered: {ref} with fixed args)"
    return Skill(
        name=name,
        description=description,
        params=params,
        allowed_tools=ref,  # exactly the ref (hidden or not), with any args
        metadata=metadata,
        origin="registered",
        _main=main,
    )


def _prompt(ctx: Context, name: str, definition: dict[str, Any]) -> Skill:
    taker = ctx.skill.name
    if not definition.get("description"):
        raise ArgsInvalid(taker, "definition.description", "a prompt skill needs a description (what it is for)")
    allowed = definition.get("allowed-tools")
    authority = Authority.of(ctx)
    if authority is not None:  # no more than the caller that registers it may call
        own = authority.allowed_tools
        if "allowed-tools" not in definition:
            allowed = own
        elif not narrows(allowed, own, ctx.manager.context_manager.catalog.skills):
            raise ToolNotAllowed(
                authority.stand_in().name, taker, f"{authority.by} may register a prompt skill only with its own "
                f"allowed-tools ({own!r}) or a part of them", path="definition.allowed-tools"
            )
    model = dict(definition.get("model") or {})
    refused = sorted(set(model) - UNTRUSTED_CONFIG_KEYS)
    if refused:
        raise ArgsInvalid(taker, f"definition.model.{refused[0]}", "a registered skill's model may set only "
                          + ", ".join(sorted(UNTRUSTED_CONFIG_KEYS)))
    provider = model.get("agent")
    if provider is not None:
        found = ctx.manager.context_manager.catalog.skills.get(provider) if isinstance(provider, str) else None
        if found is None or "provider" not in found.tags:
            raise ArgsInvalid(taker, "definition.model.agent", f"{provider!r} is not a provider skill")
    metadata: dict[str, Any] = {"tags": list(definition.get("tags") or ())}
    for key, value in (("returns", definition.get("returns")), ("model", model or None)):
        if value is not None:
            metadata[key] = value
    frontmatter = {"name": name, "description": definition["description"], "metadata": metadata}
    if definition.get("params") is not None:
        frontmatter["params"] = definition["params"]
    if allowed is not None:
        frontmatter["allowed-tools"] = allowed
    try:
        skill = skill_from_frontmatter(
            frontmatter, default_name=name, kind="prompt", origin="registered", body=definition["body"]
        )
        check_schemas(skill)
    except SkillLoadError as exc:
        raise ArgsInvalid(taker, "definition", exc.reason) from None
    return skill
