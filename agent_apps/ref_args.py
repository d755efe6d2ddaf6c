"""Skills that take refs as arguments: ``schedule-create``, ``event-subscribe``,
``skill-register``. The rules for those refs live here, in one place.

Agent code may *invoke* skills by bare name only (the sandbox ref rule). A ref it passes
*as an argument* is not an invoke target, so it is checked here instead, before anything
is stored or registered:

1. A ref is a bare skill name (``[a-z0-9-]+``), from every caller: a stored ref outlives
   the code that made it and is resolved later, maybe in another process on another
   search path, where ``file://``, ``inline://`` and ``callback://`` refs mean nothing or
   something else. (The skills' params say so with a pattern, so the pipeline refuses
   such a ref before the skill runs.)
2. It names a skill that exists now, and the args it will be invoked with validate
   against that skill's params now (errors name the arg path).
3. Agent code may not pass an internal skill (providers, executors: tag
   ``meta-internal``), nor a hidden one that its allowed-tools does not name exactly
   (``secret-job``, or ``schedule-create(ref=secret-job)``).
4. Which refs agent code may pass at all is up to allowed-tools argument constraints on
   the ref-taking skill, ``schedule-create(ref=my-*)``: the pipeline checks them like any
   constraint, before the skill runs.

``skill-register`` goes further, because the skill it makes can be called at once: a
definition cannot do more than its registrant could (:func:`registered_skill`).
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from .allowed_tools import check_call, parse_specs
from .authority import UNTRUSTED_CONFIG_KEYS
from .errors import ArgsInvalid, SkillLoadError, SkillNotFound, ToolNotAllowed
from .frontmatter import skill_from_frontmatter
from .skill import Skill, is_skill_name
from .validation import check_schemas, validate_args

if TYPE_CHECKING:
    from .context import Context

__all__ = ["RESERVED_PREFIXES", "check_ref", "created_by", "registered_skill"]

#: Names ``skill-register`` refuses besides those of existing skills: the agent and its
#: providers' namespace (``model.agent`` picks a provider by name).
RESERVED_PREFIXES = ("agent-",)
RESERVED_NAMES = ("agent",)


def check_ref(ctx: Context, ref: str, args: dict[str, Any] | None, *, arg: str = "ref") -> Skill:
    """The skill ``ref`` names, checked for the skill running in ``ctx`` (rules 1-3 of
    the module docstring); ``args`` (None: do not check) are what it will be invoked
    with, ``arg`` names the ref's place in ``ctx``'s args for errors."""
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
    caller = ctx.parent
    if caller is not None and caller.internals.get("untrusted"):
        if "meta-internal" in skill.tags or skill.kind == "callback":
            raise ToolNotAllowed(caller.skill.name, taker, f"{arg} {ref!r} is an internal skill (a provider or an "
                                 "executor), which agent code may not pass")
        if skill.hidden and not _names_exactly(caller.skill.allowed_tools, ctx.skill, arg, ref):
            raise ToolNotAllowed(caller.skill.name, taker, f"{arg} {ref!r} is hidden: agent code may pass it only "
                                 f"when its allowed-tools name it exactly ({ref} or {taker}({arg}={ref}))")
    if args is not None:
        _validate_for(taker, skill, args, "args")
    return skill


def created_by(ctx: Context) -> str | None:
    """Who is calling the ref-taking skill in ``ctx``, for the records: ``agent code of
    NAME``, a skill's name, or None (Python or the command line)."""
    caller = ctx.parent
    if caller is None:
        return None
    if caller.internals.get("untrusted"):
        scope = caller.nonlocals.get("agent") or {}
        return f"agent code of {scope.get('skill_name') or caller.skill.name}"
    return caller.skill.name


def registered_skill(ctx: Context, name: str, definition: dict[str, Any]) -> Skill:
    """The skill a ``skill-register`` definition describes, checked (docs/scheduling.md):

    * ``{"ref", "args"?, ...}``: an existing skill with fixed args. Its params are the
      ref's without the fixed ones; the caller must be allowed to call the ref with them.
    * ``{"body", "description", ...}``: a prompt skill. Its allowed-tools are at most
      the caller's when agent code registers it, and ``model`` may only set the keys
      agent code may set for a sub-agent.
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


def _names_exactly(allowed: str | None, taker: Skill, arg: str, name: str) -> bool:
    """Whether ``allowed`` names skill ``name`` exactly: as a spec of its own, or as the
    exact value of ``arg`` in a spec of the ref-taking skill ``taker``."""
    for spec in parse_specs(allowed or ""):
        if spec.exact and spec.glob == name:
            return True
        if spec.matches_name(taker) and (arg, name) in spec.constraints:
            return True
    return False


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
    target = check_ref(ctx, ref, None, arg="definition.ref")
    _validate_for(taker, target, fixed, "definition.args", partial=True)
    if ctx.parent is not None:  # it can be called at once: it may do no more than its registrant
        check_call(ctx.parent.skill, target, fixed)
    params = copy.deepcopy(target.params)
    if params is not None and fixed:
        props = params.get("properties") or {}
        params["properties"] = {k: v for k, v in props.items() if k not in fixed}
        params["required"] = [k for k in params.get("required", ()) if k not in fixed]

    async def main(actx: Any, args: dict[str, Any]) -> Any:
        for key in args.keys() & fixed.keys():
            raise ArgsInvalid(name, key, f"is fixed by this registered skill (to {fixed[key]!r})")
        return await actx.manager.invoke(ref, {**args, **fixed})

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
    caller = ctx.parent
    if not definition.get("description"):
        raise ArgsInvalid(taker, "definition.description", "a prompt skill needs a description (what it is for)")
    allowed = definition.get("allowed-tools")
    if caller is not None and caller.internals.get("untrusted"):
        own = caller.skill.allowed_tools
        if "allowed-tools" not in definition:
            allowed = own  # no more than the code that registers it may call
        elif allowed != own and not any(spec.glob == "*" for spec in parse_specs(own or "")):
            raise ToolNotAllowed(caller.skill.name, taker, "agent code may register a prompt skill only with its "
                                 f"own allowed-tools ({own!r}), unless its allowed-tools has a bare *")
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
