"""What one agent run is given: its settings, fixed before its first turn.

:func:`settle` builds them once, from the ``agent`` skill's args, the config cascade
and the agents above, and refuses what is wrong before anything starts: no model is
called and no agent is counted in the run tree. They never change afterwards (the
dataclass is frozen). What changes while the run goes is in :mod:`.run_state`.
pydantic-ai draws the same line between ``GraphAgentDeps`` and ``GraphAgentState``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..attachments import AttachmentInvalid, load
from ..authority import check_untrusted_agent_args
from ..budget import Supervision, supervision_config
from ..config import call_config
from ..errors import AgentAppsError, ArgsInvalid, ToolNotAllowed
from ..run_record import AgentLimits
from ..skill import is_skill_name
from ..state.embeddings import SEARCH_MODES
from ..state.sessions import session_id_problem
from ..validation import schema_error
from .layers import ContextRegistry, enclosing
from .limits import agent_limits, tool_timeout
from .recorder import RETENTIONS
from .workspace import resolve_workspace

if TYPE_CHECKING:
    from ..context import Context
    from ..skill import Skill

__all__ = ["MIN_THINKING_TOKENS", "RunSettings", "memory_search_options", "settle", "takes_arg", "warn_once"]

_log = logging.getLogger("agent_apps.agent")
#: The smallest ``model.thinking.budget_tokens``: Anthropic's (and so Bedrock's) minimum.
MIN_THINKING_TOKENS = 1024
_warned: set[tuple[str, ...]] = set()

#: Skills an agent never sees among its tools: itself, and the skill that runs a prompt.
_EXCLUDED = ("agent", "agent-execute")
_PROMPT = "You are a capable agent. Do the task you are given."
_USER_MESSAGE = "Do the task."


@dataclass(frozen=True)
class RunSettings:
    """The fixed inputs of one agent run (see the module docstring)."""

    #: The invocation this agent serves: the prompt skill (through agent-execute), or
    #: the skill that called ``agent`` directly.
    served: Context
    #: Middleware mode: the served skill is a prompt skill with ``role: middleware``,
    #: and this agent serves the call that middleware wraps (else None).
    serving: Context | None
    #: The display name, in events, logs and errors.
    name: str
    #: The provider skill that runs the model loop (``model.agent``).
    provider: str
    #: The resolved ``model`` config, the call layer included; the provider gets it whole.
    config: dict[str, Any]
    #: ``model.workspace`` as an absolute folder (docs/context.md), or None.
    workspace: Path | None
    #: How memory-search ranks this agent's memory: ``search`` (``model.context.search``)
    #: and ``embedding_model`` (an absolute folder, or None: the default model).
    memory_search: Mapping[str, Any]
    #: The JSON Schema the ``finish()`` value must match, or None.
    returns: Any
    #: ``model.persistent``: the run never ends on its own.
    persistent: bool
    #: Turns, steps and sandbox limits, each lowered to the enclosing agent's.
    limits: AgentLimits
    #: How often a retryable model error is retried.
    max_retries: int
    #: The allowed-tools of the agent's code (None: every visible skill).
    allowed_tools: str | None
    #: The served skill's own folder, which the agent's code may read.
    skill_dir: str | None
    #: The role layer of the system prompt.
    prompt: str
    #: The task: the first user message.
    user_message: str
    #: Images and documents that go with the user message: media parts (attachments.py).
    attachments: tuple[dict[str, Any], ...]
    #: What the caller seeds the sandbox's ``memory`` with.
    memory: Mapping[str, Any]
    #: The caller's per-task context (the ``context`` layer): ``{text, merge_parent,
    #: metadata}``, or None.
    context: Mapping[str, Any] | None
    #: ``model.retention``: what is kept once the run ends (recorder.py).
    retention: str
    #: The session this run continues, or None.
    session: str | None
    #: Off the record: the run sees its session and writes nothing to it (no messages,
    #: memory, summary or loaded guidance; no facts flushed to the workspace).
    read_only: bool
    #: Budgets, spawn limits, priority and price (budget.py).
    supervision: Supervision
    #: ``model.parallel_tool_calls``: the calls of one answer run as one sandbox run.
    parallel: bool
    #: Seconds one invoke call may take (``model.tool_timeout``), or None.
    tool_timeout: float | None
    #: The event-bus topic of the run's events, or None (no events).
    topic: str | None
    #: Skills hidden from the agent's code: its own, its provider, its ancestors'.
    exclude: tuple[str, ...]
    #: The model-level middleware and guardrails of the agent whose code started this
    #: one, which it keeps (None: not started by agent code).
    inherited: tuple[list[Any], list[Any]] | None
    #: The context id of the enclosing agent's served invocation, or None.
    ancestor_context_id: str | None
    #: The system prompt's layers of the enclosing agent (the parent of this run's), or None.
    parent_layers: ContextRegistry | None

    @property
    def max_turns(self) -> float:
        return self.limits.max_turns

    @property
    def max_steps(self) -> int:
        return self.limits.max_steps

    def scope(self) -> dict[str, Any]:
        """The ``agent`` nonlocal of the served invocation: what the skills its code
        calls and the agents below it read (mutable: loaded guidance is added to it)."""
        return {
            "events": self.topic,
            "context_id": self.served.id,
            "ancestor_context_id": self.ancestor_context_id,
            # what skill-list and skill-describe hide from this agent's code
            "skill_name": self.served.skill.name,
            "exclude": list(self.exclude),
            # the served skill's own folder, which this agent's code may read (tools/paths)
            "skill_dir": self.skill_dir,
            # its workspace and how memory-search ranks it, the guidance it loaded and their folders
            "workspace": str(self.workspace) if self.workspace is not None else None,
            "memory": dict(self.memory_search),
            "loaded_skills": [],
            "loaded_folders": [],
            "retention": self.retention,
            "read_only": self.read_only,
        }


def settle(ctx: Context, args: Mapping[str, Any]) -> RunSettings:
    """The settings of the agent run ``ctx`` (an invocation of ``agent``) with ``args``,
    checked: a refusal names the arg at fault (:class:`ArgsInvalid`), or says that agent
    code may not ask for it (:class:`ToolNotAllowed`)."""
    cm = ctx.manager.context_manager
    served = ctx.target or ctx.parent or ctx
    served_skill = served.skill
    serving = served.target if served_skill.is_middleware and served_skill.kind == "prompt" else None
    caller = ctx.parent
    untrusted_caller = caller is not None and bool(caller.internals.get("untrusted"))
    if untrusted_caller:
        check_untrusted_agent_args(caller.skill, ctx.skill, args, cm.catalog.skills)  # type: ignore[union-attr]
    # The call layer: every invoke(..., config=...) above this run (a prompt skill
    # invoked with config={"model": ...} included), then the agent's own config arg.
    call = call_config(ctx, {"model": dict(args.get("config") or {})})
    resolved = cm.config_for(served_skill, call)
    config: dict[str, Any] = resolved.values["model"]
    # The cascade's layers are read again (each file checked by its mtime) only to
    # find where a workspace was set, so not at all when no layer sets one.
    workspace = resolve_workspace(cm, served_skill, call) if "model.workspace" in resolved.sources else None
    if workspace is not None:
        config["workspace"] = str(workspace)
    memory_search = memory_search_options(ctx, config, cm.cwd)
    returns = args.get("returns")
    problem = schema_error(returns) if returns is not None else None
    if problem is not None:  # refused before the model is called, not at finish()
        raise ArgsInvalid(ctx.skill.name, "returns", problem)
    persistent = bool(config.get("persistent"))
    if persistent and returns is not None:
        raise ArgsInvalid(
            ctx.skill.name, "returns", "persistent mode never ends, so it cannot be combined with 'returns'"
        )
    limits = agent_limits(ctx, config, persistent)
    max_retries = int(config.get("max_retries", 3))
    allowed_tools: str | None = args.get("allowed_tools")
    if untrusted_caller and "allowed_tools" not in args:
        # a sub-agent started by agent code sees no more than that code does
        allowed_tools = caller.skill.allowed_tools  # type: ignore[union-attr]
    retention: str = config.get("retention") or "permanent"
    if retention not in RETENTIONS:
        raise ArgsInvalid(ctx.skill.name, "config.retention", f"must be one of {', '.join(RETENTIONS)}")
    # A session continues only for the agent an invocation serves: sub-agents started by
    # agent code never write into their caller's.
    session = ctx.internals.get("session") or served.internals.get("session")
    read_only = session is not None and bool(ctx.internals.get("read_only") or served.internals.get("read_only"))
    if session is not None:
        if untrusted_caller:
            raise ToolNotAllowed(caller.skill.name, ctx.skill.name, "agent code may not choose a session")  # type: ignore[union-attr]
        problem = session_id_problem(session)
        if problem:
            raise ArgsInvalid(ctx.skill.name, "session", problem)
    supervision = supervision_config(resolved, model_id=config.get("model_id"))
    timeout = tool_timeout(ctx, config.get("tool_timeout"))
    provider: str = config.get("agent") or "agent-strands"
    if not is_skill_name(provider):
        raise ArgsInvalid(ctx.skill.name, "config.agent", f"the provider must be a skill name, not {provider!r}")
    attachments = _attachments(ctx, args, served, provider)
    _check_thinking(ctx, config, provider)
    parent_scope = ctx.nonlocals.get("agent") or {}
    # Nested agents hide the skills their ancestors serve, too (no loops through them).
    inherited = [*parent_scope.get("exclude", ()), parent_scope.get("skill_name")]
    return RunSettings(
        served=served,
        serving=serving,
        name=args.get("name") or served_skill.name,
        provider=provider,
        config=config,
        workspace=workspace,
        memory_search=memory_search,
        returns=returns,
        persistent=persistent,
        limits=limits,
        max_retries=max_retries,
        allowed_tools=allowed_tools,
        skill_dir=served_skill.folder,
        prompt=args.get("prompt") or _PROMPT,
        user_message=args.get("user_message") or _USER_MESSAGE,
        attachments=attachments,
        memory=dict(args.get("memory") or {}),
        context=_task_context(ctx, args, served),
        retention=retention,
        session=session,
        read_only=read_only,
        supervision=supervision,
        parallel=bool(config.get("parallel_tool_calls", True)),
        tool_timeout=timeout,
        topic=args.get("events") or parent_scope.get("events"),
        exclude=(*_EXCLUDED, ctx.skill.name, provider, *filter(None, inherited)),
        inherited=parent_scope.get("around_model_calls") if _below_agent_code(ctx) else None,
        ancestor_context_id=parent_scope.get("context_id"),
        parent_layers=enclosing(ctx),
    )


def memory_search_options(ctx: Context, config: Mapping[str, Any], cwd: Path) -> dict[str, Any]:
    """``model.context.search`` (checked) and ``embedding_model`` (made absolute: a
    relative folder is relative to the working directory) of the ``model`` config: how
    memory-search ranks an agent's memory, or a direct call's."""
    options = config.get("context") or {}
    search = options.get("search") or "auto"
    if search not in SEARCH_MODES:
        raise ArgsInvalid(ctx.skill.name, "config.context.search", f"must be one of {', '.join(SEARCH_MODES)}")
    model = options.get("embedding_model")
    return {"search": search, "embedding_model": str(cwd / Path(model).expanduser()) if model else None}
def takes_arg(provider: Skill, arg: str) -> bool:
    """Whether the provider skill takes ``arg`` (optional args newer than a provider
    are sent only to providers that say they take them)."""
    props = (provider.params or {}).get("properties")
    return isinstance(props, dict) and arg in props


def _attachments(ctx: Context, args: Mapping[str, Any], served: Context, provider: str) -> tuple[dict[str, Any], ...]:
    """The images and documents for the user message: the ``attachments`` arg (media
    parts, never paths: agent code may give it), else the ``attachments=`` option of
    this invocation or of the one it serves (checked by the pipeline). Refused when the
    provider cannot take them."""
    given = args.get("attachments")
    try:
        parts = load(given, files=False) if given is not None else []
    except AttachmentInvalid as exc:
        raise ArgsInvalid(ctx.skill.name, exc.path, str(exc)) from None
    parts = parts or list(ctx.internals.get("attachments") or served.internals.get("attachments") or ())
    if not parts:
        return ()
    try:
        skill = ctx.manager.context_manager.get(provider)
    except AgentAppsError:
        return tuple(parts)  # the provider call will say what is wrong with it
    if not takes_arg(skill, "attachments"):
        raise ArgsInvalid(
            ctx.skill.name,
            "attachments",
            f"provider {provider!r} cannot take attachments (images, documents); agent-strands can "
            "(Bedrock, Anthropic, OpenAI-compatible servers), and agent-scripted plays along",
        )
    return tuple(parts)


def warn_once(key: tuple[str, ...], message: str, *args: Any) -> None:
    """Log ``message`` as a warning the first time this process meets ``key``: a setting
    ignored on every run would otherwise fill the log."""
    if key not in _warned:
        _warned.add(key)
        _log.warning(message, *args)


def _check_thinking(ctx: Context, config: Mapping[str, Any], provider: str) -> None:
    """Refuse a ``model.thinking`` budget below :data:`MIN_THINKING_TOKENS`; warn once
    when the provider has no reasoning settings (``metadata.provider.thinking``), which
    then runs without them."""
    thinking = config.get("thinking")
    if not thinking:
        return
    budget = thinking.get("budget_tokens")
    if not isinstance(budget, int) or isinstance(budget, bool) or budget < MIN_THINKING_TOKENS:
        raise ArgsInvalid(
            ctx.skill.name,
            "config.thinking.budget_tokens",
            f"must be an integer of at least {MIN_THINKING_TOKENS} (the smallest reasoning budget Anthropic takes), "
            f"not {budget!r}",
        )
    try:
        declared = (ctx.manager.context_manager.get(provider).metadata or {}).get("provider")
    except AgentAppsError:
        return  # the provider call will say what is wrong with it
    if not (isinstance(declared, dict) and declared.get("thinking")):
        warn_once(
            ("thinking", provider),
            "model.thinking is ignored: provider %r has no reasoning settings (agent-strands has them)",
            provider,
        )


def _task_context(ctx: Context, args: Mapping[str, Any], served: Context) -> dict[str, Any] | None:
    """The per-task context of this run: the ``context`` arg, else the ``context=``
    option of the invocation it serves (a prompt skill's). A text, or ``{text,
    merge_parent?, metadata?}``; anything else is refused, naming the arg."""
    given = args.get("context")
    if given is None:
        given = ctx.internals.get("context") or served.internals.get("context")
    if given is None:
        return None
    where = ctx.skill.name
    if isinstance(given, str):
        given = {"text": given}
    if not isinstance(given, Mapping) or not isinstance(given.get("text"), str):
        raise ArgsInvalid(where, "context", "a per-task context is a text, or an object with a 'text'")
    unknown = sorted(set(given) - {"text", "merge_parent", "metadata"})
    if unknown:
        raise ArgsInvalid(where, f"context.{unknown[0]}", "not one of text, merge_parent, metadata")
    if not isinstance(given.get("merge_parent", False), bool):
        raise ArgsInvalid(where, "context.merge_parent", "must be true or false")
    if not isinstance(given.get("metadata", {}), Mapping):
        raise ArgsInvalid(where, "context.metadata", "must be an object")
    return {"text": given["text"], "merge_parent": given.get("merge_parent", False),
            "metadata": dict(given.get("metadata") or {})}  # fmt: skip


def _below_agent_code(ctx: Context) -> bool:
    """Whether this agent run was started, at any depth, by an agent's code (not by
    the policy around the agent's model calls, as a guardrail or middleware agent is)."""
    node = ctx.parent
    while node is not None and node.skill.name != "agent":
        if node.internals.get("untrusted"):
            return True
        node = node.parent
    return False
