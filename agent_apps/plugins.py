"""Plugin hooks (pluggy) and the ``agent_apps.skills`` entry-point group.

An installed package contributes skills by declaring an entry point in the
``agent_apps.skills`` group that names a module (or object) implementing these hooks::

    # pyproject.toml of the package
    [project.entry-points."agent_apps.skills"]
    my-skills = "my_skills.plugin"

    # my_skills/plugin.py
    from pathlib import Path
    from agent_apps import hookimpl

    @hookimpl
    def agent_apps_skill_dirs():
        return [Path(__file__).parent / "skills"]

Plugins can also be passed to ``ContextManager(plugins=[...])`` directly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from .agent.layers import ContextRegistry
    from .agent.run import AgentRun
    from .manager import ContextManager
    from .skill import Skill

__all__ = ["BUILTIN_PLUGINS", "ENTRY_POINT_GROUP", "PluginError", "hookimpl", "hookspec", "load_plugins"]

#: Plugins of agent-apps itself, registered in every ContextManager: a module, or
#: ``module:Factory`` for a plugin with settings (one instance per manager, unless the
#: caller passed its own instance of that class). Their modules import nothing heavy.
BUILTIN_PLUGINS: tuple[str, ...] = ("agent_apps.tools.plugin:ToolsPlugin", "agent_apps.mcp.plugin")

ENTRY_POINT_GROUP = "agent_apps.skills"
hookspec = pluggy.HookspecMarker("agent_apps")
hookimpl = pluggy.HookimplMarker("agent_apps")


class HookSpecs:
    """The hooks a plugin may implement. Every hook is optional."""

    @hookspec
    def agent_apps_skill_dirs(self) -> Iterable[str | Path]:  # type: ignore[empty-body]
        """Directories of skill files this plugin contributes to the search path.

        They come after the user's directories and before the bundled skills, so a
        package can shadow a bundled skill and a project can shadow a package.
        """

    @hookspec
    def agent_apps_middleware(self) -> Sequence[str | Callable[..., Any]]:  # type: ignore[empty-body]
        """Global middleware, outermost first: refs like ``"audit(level=info)"`` or
        plain ``async def mw(ctx, call_next)`` callables."""

    @hookspec
    def agent_apps_skills(self, manager: ContextManager) -> Iterable[Skill]:  # type: ignore[empty-body]
        """Skills that do not live in files (tools.yaml entries, MCP servers' tools).

        They rank with package directories: after the user's skills, before the
        bundled ones. Build them cheaply: ``agent-apps list`` calls this hook.
        """

    @hookspec
    def agent_apps_config_keys(self) -> Mapping[str, str | None]:  # type: ignore[empty-body]
        """Config keys this package reads, so that config files holding them are valid.

        Dotted keys mapped to their type, one of :data:`agent_apps.config.KEY_TYPES`
        (``"a string"``, ``"an integer"``, ``"a mapping"``, ...), or None for any value:
        ``{"notes.folder": "a string", "notes.limits": None}``. The sections above a key
        (``notes``) are known with it. Any other key in a config file is an error naming
        it and the nearest known key.
        """

    @hookspec
    def agent_apps_configure(self, manager: ContextManager) -> None:
        """Called once when a ContextManager first loads its skills."""

    @hookspec
    def agent_apps_context(self, registry: ContextRegistry, agent: AgentRun) -> None:
        """Add, replace or remove layers of an agent run's system prompt, just before it
        is composed: ``registry.add("my-layer", text, priority=85, stable=True,
        owner="my-package")``. Stable layers (the same every run) take priorities below
        100 and dynamic ones 100 and above, so prompt caches hold (docs/context.md).
        ``agent`` is the run: ``agent.config``, ``agent.user_message``, ``agent.served``."""


    # -- lifecycle hooks of agent runs (agent_apps/agent/hooks.py, docs/agent.md "Hooks") --
    # ``agent`` is the run (AgentRun); ``event`` is the event the run sends at that moment,
    # the dict its subscribers get. An implementation may return an awaitable.

    @hookspec
    def agent_apps_run_start(self, agent: AgentRun, event: dict[str, Any]) -> None:
        """An agent run began (``agent-start``): its prompt is built, no model was called."""

    @hookspec
    def agent_apps_run_complete(self, agent: AgentRun, event: dict[str, Any]) -> None:
        """An agent run ended (``agent-complete``, or the ``agent-error`` that ended it):
        ``event["status"]`` says how."""

    @hookspec
    def agent_apps_step_start(self, agent: AgentRun, event: dict[str, Any]) -> None:
        """A step (one turn: a model call and the code it ran) began (``turn-start``)."""

    @hookspec
    def agent_apps_step_complete(self, agent: AgentRun, event: dict[str, Any]) -> None:
        """A step ended (``turn-end``); ``event["step"]`` is its report: latency, usage,
        finish reason, tool calls."""

    @hookspec
    def agent_apps_approval_requested(self, agent: AgentRun, event: dict[str, Any]) -> None:
        """A call from the agent's code needs a human's approval (asked the first time)."""

    @hookspec
    def agent_apps_approval_resolved(self, agent: AgentRun, event: dict[str, Any]) -> None:
        """The human's decision on that call came, or a resumed run applied it."""

    @hookspec
    def agent_apps_tool_call_start(self, agent: AgentRun, call: dict[str, Any]) -> Any:
        """A host call from the agent's code is about to be made (``call``: skill, args,
        id). Return None to make it, ``{"skip": True}`` to skip it (the code gets None)
        or ``{"result": value}`` to answer it without making it. The first directive
        wins; it is journaled (a resumed run does not ask again)."""

    @hookspec
    def agent_apps_tool_call_complete(self, agent: AgentRun, call: dict[str, Any]) -> None:
        """A host call returned (``call`` adds ``result``, ``latency_ms``, ``metrics``)."""

    @hookspec
    def agent_apps_tool_call_error(self, agent: AgentRun, call: dict[str, Any], error: BaseException) -> Any:
        """A host call failed with ``error``. Return None (the code gets the error) or
        ``{"result": value}``: a fallback the code gets instead (journaled)."""


@dataclass(frozen=True)
class PluginError:
    """An entry point that failed to load; reported by ``agent-apps list``."""

    name: str
    dist: str
    message: str


def load_plugins(
    plugins: Sequence[object], *, entry_points: bool
) -> tuple[pluggy.PluginManager, dict[str, str], list[PluginError]]:
    """A plugin manager with ``plugins`` and the entry-point plugins registered.

    Returns the manager, the distribution name of each registered plugin (by plugin
    name, for skill origins) and the entry points that failed. A broken package never
    stops the others from loading.
    """
    pm = pluggy.PluginManager("agent_apps")
    pm.add_hookspecs(HookSpecs)
    dists: dict[str, str] = {}
    errors: list[PluginError] = []
    import importlib

    for spec in BUILTIN_PLUGINS:
        module_name, _, factory = spec.partition(":")
        plugin: object = importlib.import_module(module_name)
        if factory:
            cls = getattr(plugin, factory)
            if any(isinstance(p, cls) for p in plugins):
                continue  # the caller configured its own
            plugin = cls()
        pm.register(plugin, name=spec)
        dists[spec] = "agent-apps"
    for plugin in plugins:
        name = pm.register(plugin)
        if name is not None:
            dists[name] = getattr(plugin, "__name__", name)
    if entry_points and _may_declare(ENTRY_POINT_GROUP):
        from importlib.metadata import entry_points as _entry_points

        for ep in _entry_points(group=ENTRY_POINT_GROUP):
            dist = ep.dist.name if ep.dist is not None else ep.name
            if pm.get_plugin(ep.name) is not None:
                continue
            try:
                obj = ep.load()
                pm.register(obj, name=ep.name)
            except Exception as exc:  # a broken package must not break the others
                errors.append(PluginError(ep.name, dist, f"{type(exc).__name__}: {exc}"))
                continue
            dists[ep.name] = dist
    return pm, dists, errors


def _may_declare(group: str) -> bool:
    """Whether an installed distribution may declare an entry point in ``group``.

    A quick look at the files :mod:`importlib.metadata` reads (``entry_points.txt`` in
    each ``*.dist-info`` and ``*.egg-info`` on ``sys.path``), so that when no package
    mentions the group (the usual case) importlib.metadata, which costs a command's
    start more than the look, is not imported at all. Whatever this does not read (a zip
    file on sys.path, a finder of distributions of its own) counts as a yes.
    """
    import os
    import sys
    from importlib.machinery import PathFinder

    if any(getattr(f, "find_distributions", None) is not None and f is not PathFinder for f in sys.meta_path):
        return True
    needle = group.encode()
    for entry in sys.path:
        try:
            root = os.fspath(entry) or "."
            children = os.listdir(root)
        except (TypeError, NotADirectoryError):
            return True
        except OSError:  # not there
            continue
        for child in children:
            if not child.lower().endswith((".dist-info", "egg-info")):
                continue
            try:
                with open(os.path.join(root, child, "entry_points.txt"), "rb") as fh:
                    if needle in fh.read():
                        return True
            except OSError:  # none, or an egg-info file
                continue
    return False
