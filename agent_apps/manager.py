"""The :class:`ContextManager`: the search path, the catalog of skills, and the entry
point of every invocation (the stages themselves are in :mod:`agent_apps.pipeline`)."""

from __future__ import annotations

import fnmatch
import os
from collections.abc import AsyncIterable, Callable, Coroutine, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from ._random import token_urlsafe
from .config import Cascade, Layer, agent_apps_home, key_table
from .errors import AgentAppsError, SkillLoadError, SkillNotFound, ToolNotAllowed
from .events import EventBus
from .frontmatter import skill_from_frontmatter
from .loading import load_file, load_source, skill_name_for
from .plugins import PluginError, load_plugins
from .searchpath import Catalog, Root, bundled_roots
from .skill import Skill, is_skill_name

# What only running a skill needs (the pipeline, contexts, middleware, validation, and
# asyncio below them) is imported where it is used: listing or describing skills, and
# the command line's start, never pay for it (docs/cli.md, "Start-up time").
if TYPE_CHECKING:
    import asyncio

    from .admission import Admission
    from .allowed_tools import Visible
    from .batch import Batch
    from .config import Resolved
    from .context import Context
    from .middleware import MiddlewareFn
    from .run_record import RunRecord
    from .run_stream import RunStream
    from .state import StateStore

__all__ = ["ContextManager"]

CALLBACK_SCHEME = "callback://"
#: ``approve()`` without a ``result``: the call is made, not answered (None is a result).
_NO_RESULT: Any = object()
_PATH_SUFFIXES = (".skill.py", ".skill.md", "SKILL.md", "skill.md")

MiddlewareRef: TypeAlias = "str | tuple[str, dict[str, Any]] | MiddlewareFn"


class ContextManager:
    """Finds skills on the search path and runs invocations through the pipeline.

    ``search_path`` directories come first, then ``AGENT_APPS_PATH``, the project's
    ``./skills``, the user's ``~/.agent-apps/skills``, installed packages and the
    bundled skills (CONTRACT section 2). Each of the implicit layers can be turned off,
    which tests and embedders use to get a hermetic manager.
    """

    def __init__(
        self,
        search_path: Iterable[str | os.PathLike[str]] | None = None,
        *,
        cwd: str | os.PathLike[str] | None = None,
        home: str | os.PathLike[str] | None = None,
        plugins: Sequence[object] = (),
        middleware: Sequence[MiddlewareRef] = (),
        env: bool = True,
        project: bool = True,
        user: bool = True,
        entry_points: bool = True,
        bundled: bool = True,
        max_depth: int = 64,
        state: str | os.PathLike[str] | StateStore | None = None,
    ) -> None:
        self.id = os.urandom(3).hex()  # what secrets.token_hex(3) does, without importing it
        self.cwd = Path(cwd) if cwd is not None else Path.cwd()
        self.home = Path(home) if home is not None else agent_apps_home()
        self.max_depth = max_depth
        self.events = EventBus(self)
        self.cascade = Cascade(cwd=self.cwd, home=self.home, project=project, keys=self.config_keys)
        self._explicit = [Path(p) for p in (search_path or ())]
        self._layers = {"env": env, "project": project, "user": user, "bundled": bundled}
        self._plugins = list(plugins)
        self._entry_points = entry_points
        self._middleware = list(middleware)
        self._catalog: Catalog | None = None
        self._path_dirs: list[Path] | None = None  # those the catalog was built from
        self._building = False
        self._keys: dict[tuple[str, ...], str] | None = None
        self._plugin_errors: list[PluginError] = []
        self._pm: Any = None
        self._callbacks: dict[str, Skill] = {}
        self._files: dict[tuple[str, int], Skill] = {}
        self._inline: dict[str, Skill] = {}
        self._middleware_fns: dict[Any, MiddlewareFn] = {}
        #: The ``agent-code`` skills of this manager's agent runs (agent/executor.py), by
        #: agent and allowed-tools, so that what a skill caches is made once per agent.
        self._code_skills: dict[tuple[str, str | None], Skill] = {}
        self._loop_for_threads: asyncio.AbstractEventLoop | None = None
        self._registered: dict[str, Skill] = {}
        self._state: Any = state
        if state is not None and not isinstance(state, (str, os.PathLike)):
            state.db.on_open(self._subscribe_persisted)
        #: The runs in progress (top-level invocations that made a run record), by id.
        self._runs: dict[str, RunRecord] = {}
        self._admission: Admission | None = None

    # -- the catalog -------------------------------------------------------------------

    @property
    def catalog(self) -> Catalog:
        """Every skill on the search path (built on first use; :meth:`reload` rebuilds)."""
        if self._catalog is None:
            self._building = True
            pm, dists, self._plugin_errors = load_plugins(self._plugins, entry_points=self._entry_points)
            self._pm = pm
            roots = self.roots(pm, dists)
            self._path_dirs = [r.path for r in roots if r.origin == "path"]
            bundled = [r for r in roots if r.origin == "bundled"]
            contributed = pm.hook.agent_apps_skills(manager=self)
            sources: list[Root | Iterable[Skill]] = [r for r in roots if r.origin != "bundled"]
            self._catalog = Catalog.build([*sources, *contributed, *bundled, list(self._registered.values())])
            self._building = False
            pm.hook.agent_apps_configure(manager=self)
        return self._catalog

    @property
    def hook(self) -> Any:
        """The plugins' hooks (``cm.hook.agent_apps_context(...)``); plugins load with
        the catalog."""
        _ = self.catalog
        return self._pm.hook

    def path_dirs(self) -> list[Path]:
        """The search path's directories named by path (``paths`` and, if read,
        ``$AGENT_APPS_PATH``), resolved, in order, each once: what a durable run records
        to find its skills again. Those the catalog was built from, while it is kept
        (until :meth:`reload`): a run asks on every start, and resolving costs system calls."""
        if self._catalog is not None and self._path_dirs is not None:
            return list(self._path_dirs)
        dirs = [p.resolve() for p in self._explicit]
        if self._layers["env"]:
            env = os.environ.get("AGENT_APPS_PATH", "")
            dirs += [Path(p).resolve() for p in env.split(os.pathsep) if p]
        return list(dict.fromkeys(dirs))

    def roots(self, pm: Any = None, dists: dict[str, str] | None = None) -> list[Root]:
        """The search path, in order, with the origin of each directory."""
        roots = [Root(path, "path") for path in self.path_dirs()]
        if self._layers["project"]:
            roots.append(Root((self.cwd / "skills").resolve(), "project"))
        if self._layers["user"]:
            roots.append(Root(self.home / "skills", "user"))
        if pm is not None:
            for plugin_name, plugin in pm.list_name_plugin():
                impl = getattr(plugin, "agent_apps_skill_dirs", None)
                if impl is None:
                    continue
                origin = f"package:{(dists or {}).get(plugin_name, plugin_name)}"
                roots += [Root(Path(d).resolve(), origin) for d in impl() or ()]
        if self._layers["bundled"]:
            roots += bundled_roots()
        unique: dict[Path, Root] = {}  # a directory is scanned once, at its first place
        for root in roots:
            unique.setdefault(root.path, root)
        return list(unique.values())

    @property
    def state(self) -> StateStore:
        """The state store (sessions, runs): ``state=`` (a path, ``":memory:"`` or a
        ``postgresql://`` URL), else ``AGENT_APPS_STATE``, ``state.path`` from config,
        ``home/state.db``. It is opened on first use, so managers that run no agent
        never touch it."""
        from .state import StateStore, state_path

        if not isinstance(self._state, StateStore):
            cascade = self.cascade if self._state is None else None
            path = self._state if self._state is not None else state_path(cascade, self.home)
            self._state = StateStore(path)
            self._state.db.on_open(self._subscribe_persisted)
        return self._state

    def _subscribe_persisted(self, conn: Any) -> None:
        """The store just opened: subscribe the event subscriptions persisted in it."""
        from .state.subscriptions import Subscriptions

        self.events.sync_persisted((s.id, s.topic, s.ref, s.authority) for s in Subscriptions.read(conn))

    @property
    def admission(self) -> Admission:
        """Admission control for this manager's agent runs: live sandboxes and
        concurrent model calls per provider (config ``admission``, docs/supervision.md)."""
        if self._admission is None:
            from .admission import Admission

            self._admission = Admission.from_cascade(self.cascade)
        return self._admission

    def reload(self) -> None:
        """Forget the catalog and every cache; the next use scans the search path again."""
        self._catalog = None
        self._keys = None
        self._files.clear()
        self._middleware_fns.clear()
        self._code_skills.clear()

    def register(self, skill: Skill, *, replace: bool = False) -> None:
        """Make ``skill`` a named skill of this manager for as long as it lives (what
        ``skill-register`` does): listed, discovered and invoked like any other. It never
        shadows a skill of the search path, and ``replace`` replaces only a registered one;
        a skill file of its name that appears later wins (``list --all`` shows it)."""
        catalog = self.catalog
        old = self._registered.get(skill.name)
        current = catalog.skills.get(skill.name)
        if current is not None and current is not old:
            raise AgentAppsError(
                f"a skill named {skill.name!r} exists ({current.where()}); a registered skill never shadows another",
                skill=skill.name,
            )
        if old is not None:
            if not replace:
                raise AgentAppsError(f"{skill.name!r} is registered already (replace it with replace: true)")
            catalog.remove(old)
        self._registered[skill.name] = skill
        catalog.add(skill)

    def skills(self) -> list[Skill]:
        """The winning skill of each name, sorted by name."""
        return sorted(self.catalog.skills.values(), key=lambda s: s.name)

    @property
    def errors(self) -> list[AgentAppsError]:
        """Broken skill files and broken plugin packages, each with a clear message."""
        errors: list[AgentAppsError] = list(self.catalog.errors)
        errors += [AgentAppsError(f"package {e.dist} ({e.name}): {e.message}") for e in self._plugin_errors]
        return errors

    def get(self, name: str) -> Skill:
        """The skill named ``name``, or :class:`SkillNotFound` with suggestions."""
        skill = self.catalog.skills.get(name)
        if skill is None:
            raise self._not_found(name)
        return skill

    def _not_found(self, name: str) -> AgentAppsError:
        """Why there is no skill ``name``: the file of that name that failed to load (even
        when the name itself is invalid, like ``Bad_Name``), else "did you mean"."""
        for error in self.catalog.errors:
            if error.skill == name or skill_name_for(Path(error.path)) == name:
                return error
        for error in self.catalog.errors:  # a source of several skills (an MCP server) failed
            if error.skill and "*" in error.skill and fnmatch.fnmatchcase(name, error.skill):
                return SkillNotFound(name, reason=str(error))
        import difflib

        return SkillNotFound(name, suggestions=difflib.get_close_matches(name, list(self.catalog.skills), n=3))

    def describe(self, name: str) -> dict[str, Any]:
        """A skill's description; also checks its schemas against the meta-schema."""
        from .validation import check_schemas

        skill = self.get(name)
        check_schemas(skill)
        return skill.describe()

    def config_for(self, skill: Skill | str | None, call: dict[str, Any] | None = None) -> Resolved:
        """The cascaded config of a skill, with the source of every value."""
        if isinstance(skill, str):
            skill = self.get(skill)
        return self.cascade.resolve(skill, call)

    def config_keys(self) -> dict[tuple[str, ...], str] | None:
        """Every config key anything on the search path reads (see :func:`~agent_apps.config.key_table`):
        the cascade holds config files and calls to it. None while the catalog is being
        built, since skills declare keys too (config read by plugins then is checked by
        the next reader)."""
        if self._building:
            return None
        if self._keys is None:
            skills = self.catalog.skills.values()
            self._keys = key_table(self._pm.hook.agent_apps_config_keys(), skills)
        return self._keys

    def check_call_config(self, config: Mapping[str, Any]) -> None:
        """Raise :class:`ConfigError` for a key of ``invoke(..., config=...)`` that nothing reads."""
        keys = self.config_keys()
        if keys is not None:
            self.cascade.check(Layer("call", config, "call"), keys)

    def visible_tools(self, allowed: str | None, *, caller: str | None = None, exclude: Iterable[str] = ()) -> Visible:
        """Which skills a caller with ``allowed`` may see (the agent's tool list)."""
        from .allowed_tools import visible_tools

        return visible_tools(self.skills(), allowed, caller=caller, exclude=exclude)

    def visible_to(self, caller: Context | None) -> Visible:
        """What the skill running in ``caller`` may see (``skill-list`` uses it).

        For agent code the agent's own view applies: the served skill is the caller
        (so it does not see itself) and the agent and its provider are excluded.
        """
        if caller is None:
            return self.visible_tools("*")
        scope = caller.nonlocals.get("agent") if caller.internals.get("untrusted") else None
        if scope:
            return self.visible_tools(
                caller.skill.allowed_tools, caller=scope.get("skill_name"), exclude=scope.get("exclude", ())
            )
        return self.visible_tools(caller.skill.allowed_tools, caller=caller.skill.name)

    # -- invoking ----------------------------------------------------------------------

    async def invoke(self, ref: Any, args: dict[str, Any] | None = None, **options: Any) -> Any:
        """Invoke a skill from outside any skill and return its result.

        ``ref``: a skill name, ``file://PATH`` (or a path to a skill file),
        ``inline://SOURCE``, a callback ref, a :class:`Skill`, or a dict with
        frontmatter keys and a ``main`` callable. Options: ``middleware=[...]``
        (call-time middleware), ``config={...}`` (the call layer of the cascade),
        ``signal=Signal()`` (cancel it to cancel the invocation), ``timeout=SECONDS``
        (cancel the whole run after that long), ``tenant=ID`` (the tenant the run
        serves: ``ctx.run.tenant_id`` everywhere in it, kept with it in the store),
        ``internals={...}``
        (per-invocation flags), ``nonlocals={...}`` (seen by every descendant, e.g.
        ``{"agent": {"events": "my-topic"}}`` to hear every agent below).

        Cancelling ``signal`` raises :class:`Cancelled`; cancelling the awaiting task
        (or Ctrl-C) cancels the signal too, so threads and sandboxes stop.
        """
        from . import pipeline
        from .context import Signal

        signal = options.get("signal") or Signal()
        options["signal"] = signal
        timeout = options.pop("timeout", None)
        if timeout is None:
            return await signal.guard(pipeline.invoke(self, ref, args, None, options))
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < float("inf"):
            raise ValueError(f"timeout must be a number of seconds > 0, not {timeout!r}")
        import asyncio

        timer = asyncio.get_running_loop().call_later(timeout, signal.cancel, f"timed out after {timeout:g} s")
        try:
            return await signal.guard(pipeline.invoke(self, ref, args, None, options))
        finally:
            timer.cancel()

    def stream(self, ref: Any, args: dict[str, Any] | None = None, **options: Any) -> RunStream:
        """Invoke ``ref`` and read its events as they happen (CONTRACT section 14)::

            async with cm.stream("haiku", {"task": "a pond"}) as run:
                async for event in run:          # the same events as --events
                    print(event["type"])
            print(run.status, run.result, run.run_id)

        ``options`` are :meth:`invoke`'s. A reader that falls behind holds the run back
        (at most :data:`~agent_apps.run_stream.BUFFER` events wait); leaving the loop
        or the block early cancels the run. See :mod:`agent_apps.run_stream`."""
        from .run_stream import RunStream

        return RunStream(self, ref, args, options)

    def cancel(self, run_id: str, reason: str = "cancelled") -> bool:
        """Cancel the run ``run_id`` (``ctx.run.run_id``, a run report's ``run_id``) and
        everything in it: its agents, their model calls, sandboxes and subprocesses.
        Returns False when no run of that id is in progress in this manager."""
        record = self._runs.get(run_id)
        if record is None or record.signal is None:
            return False
        record.signal.cancel(reason)
        return True

    def stop(self, run_id: str, reason: str | None = None) -> bool:
        """Stop the run ``run_id`` (or a unique prefix of it) gracefully: the host call
        in flight finishes, no further turn starts, and it ends with status ``stopped``
        and the model's last text as its result (every agent of the run does). A run of
        another process (on any machine sharing the state store) stops within a moment
        (it polls for the request); a run waiting for approval is stopped at once.
        ``reason`` shows in its status message. Returns False when no run of that id
        is in progress or waiting. :meth:`cancel` is the hard stop."""
        reason = reason or "stop requested"
        record = self._runs.get(run_id)
        if record is None:
            found = [r for ident, r in list(self._runs.items()) if run_id and ident.startswith(run_id)]
            record = found[0] if len(found) == 1 else None
        if record is not None:
            record.tree.request_stop(reason)
            return True
        from .state import NotFound, NotResumable

        try:
            self.state.runs.stop(run_id, reason)
        except (NotFound, NotResumable):
            return False
        return True

    def invoke_sync(self, ref: Any, args: dict[str, Any] | None = None, **options: Any) -> Any:
        """:meth:`invoke` for scripts: runs its own event loop until the result is in."""
        import asyncio

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise RuntimeError("invoke_sync() cannot run inside an event loop; use 'await manager.invoke(...)'")

        async def run() -> Any:
            try:
                return await self.invoke(ref, args, **options)
            finally:
                await self.events.drain()

        return asyncio.run(run())

    def batch(
        self,
        ref: Any,
        inputs: Iterable[Any] | AsyncIterable[Any],
        *,
        concurrency: int | None = None,
        ray: str | None = None,
        retries: int = 3,
        config: Mapping[str, Any] | None = None,
        tenant: str | None = None,
    ) -> Batch:
        """Invoke ``ref`` once per item of ``inputs`` (args mappings), ``concurrency`` at
        a time: ``async for result in cm.batch(...)`` yields a
        :class:`~agent_apps.batch.BatchResult` per input in completion order; a bad input
        or a failed run is that result's error, never the end of the batch. ``ray="auto"``
        (or an address) spreads the runs over a Ray cluster. See :class:`~agent_apps.batch.Batch`
        and docs/batch.md. ``config`` and ``tenant`` are :meth:`invoke`'s, for every run."""
        from .batch import Batch

        return Batch(
            self, ref, inputs, concurrency=concurrency, ray=ray, retries=retries, config=config, tenant=tenant
        )

    def _invoke(self, ref: Any, args: Any, parent: Context | None, options: dict[str, Any]) -> Coroutine[Any, Any, Any]:
        """An invocation under ``parent`` (``ctx.manager.invoke``): the pipeline's own
        coroutine, not one that awaits it, as agent code calls this in loops."""
        from . import pipeline

        return pipeline.invoke(self, ref, args, parent, options)

    # -- durable runs (docs/durability.md) ------------------------------------------------

    async def resume(self, run_id: str, **options: Any) -> Any:
        """Continue a durable run that stopped: checkpointed for approval (decide with
        :meth:`approve` first), killed mid-way, failed or cancelled. Its root skill is
        invoked again, in the same run, replaying the journal: model turns already
        answered are not requested again, host calls already made are not made again.
        ``options`` are :meth:`invoke`'s (the recorded config and session by default)."""
        from .agent.durable import resume

        return await resume(self, run_id, **options)

    def approve(self, run_id: str, *, deny: str | None = None, skip: bool = False, result: Any = _NO_RESULT) -> Any:
        """Decide on the call a run waits for: approve it, ``deny="reason"`` (the agent
        code gets the refusal), ``skip=True`` (the call is not made; the code gets
        None) or ``result=VALUE`` (the call is not made; the code gets VALUE, any JSON,
        None included, checked against the skill's ``returns``). Returns the run's
        checkpoint; :meth:`resume` then continues the run."""
        from .agent.durable import decide

        supplied = {"result": result} if result is not _NO_RESULT else {}
        return decide(self, run_id, deny=deny, skip=skip, **supplied)

    # -- callback refs -----------------------------------------------------------------

    def callback(
        self,
        fn: Callable[..., Any],
        *,
        owner: Context | None = None,
        name: str = "callback",
        params: dict[str, Any] | None = None,
        description: str = "",
    ) -> str:
        """Register ``fn(ctx, args)`` as an ephemeral hidden skill and return its ref.

        The ref is a string (``callback://NAME.TOKEN``) that can cross any boundary
        (MCP, another process through our server) and is invoked like any skill.
        Holding it is the permission to call it: allowed-tools does not apply, but
        agent code can never use it (it is not a bare name). It is released when
        ``owner``'s invocation ends (or by :meth:`release`).
        """
        ref = f"{CALLBACK_SCHEME}{name}.{token_urlsafe(12)}"
        self._callbacks[ref] = Skill(
            name=name,
            description=description,
            params=params if params is not None else {"type": "object"},
            metadata={"visibility": "hidden"},
            kind="callback",
            origin="callback",
            _main=fn,
        )
        if owner is not None:
            owner.callbacks = [*(owner.callbacks or ()), ref]
        return ref

    def release(self, ref: str) -> None:
        """Forget a callback ref; invoking it afterwards raises SkillNotFound."""
        self._callbacks.pop(ref, None)

    # -- used by the pipeline ------------------------------------------------------------

    def _resolve(self, ref: Any, parent: Context | None) -> Skill:
        """Stage 1 of the pipeline: what ``ref`` names."""
        if is_skill_name(ref):  # the common case, and the only one agent code may use
            return self.get(ref)
        if parent is not None and parent.internals.get("untrusted"):
            raise ToolNotAllowed(
                parent.skill.name,
                ascii(ref) if isinstance(ref, str) else type(ref).__name__,
                "agent code may only invoke skills by bare name ([a-z0-9-]+); "
                "file://, inline://, callback refs and paths are refused",
            )
        if isinstance(ref, Skill):
            return ref
        if isinstance(ref, dict):
            return _anonymous(ref)
        if not isinstance(ref, str):
            raise AgentAppsError(f"a skill ref must be a string, a Skill or a dict, not {type(ref).__name__}")
        if ref.startswith(CALLBACK_SCHEME):
            skill = self._callbacks.get(ref)
            if skill is None:
                raise SkillNotFound(ref.split(".", 1)[0] + ".… (released or unknown callback ref)")
            return skill
        if ref.startswith("inline://"):
            source = ref[len("inline://") :]
            skill = self._inline.get(source)
            if skill is None:
                skill = self._inline[source] = load_source(source)
            return skill
        scheme, sep, _ = ref.partition("://")
        if sep and scheme != "file":
            raise SkillNotFound(
                ref[:60], reason=f"unknown ref scheme '{scheme}://' (use a name, file://, inline:// or callback://)"
            )
        if ref.startswith("file://") or ref.endswith(_PATH_SUFFIXES) or "/" in ref or os.sep in ref:
            return self._file_skill(Path(ref.removeprefix("file://")))
        raise self._not_found(ref)

    def _file_skill(self, path: Path) -> Skill:
        path = (self.cwd / path).resolve() if not path.is_absolute() else path
        try:
            mtime = path.stat().st_mtime_ns
        except OSError as exc:
            raise SkillNotFound(f"file://{path}", path=str(path), reason=exc.strerror or "cannot read it") from None
        key = (str(path), mtime)
        skill = self._files.get(key)
        if skill is None:
            skill = self._files[key] = load_file(path, origin="file", root=str(path.parent))
        return skill

    def _onion(
        self, skill: Skill, call_middleware: Sequence[MiddlewareRef] | None
    ) -> Callable[[Context, Any], Any] | None:
        """The composed middleware for one invocation (cached per skill). Middleware
        helpers are imported only to build it, not on every call."""
        if skill.kind == "callback" or skill.is_middleware:
            fixed: list[MiddlewareFn] = []
        else:
            fixed = skill._cache.get("middleware")  # type: ignore[assignment]
            if fixed is None:
                from .middleware import applies, expand_agent

                refs: list[MiddlewareRef] = [*self._plugin_middleware(), *self._middleware]
                refs += self.config_for(skill).values.get("middleware") or []
                refs += list(skill.middleware)
                refs = expand_agent(self, skill, refs)
                every = skill._cache["middleware_all"] = [self._middleware_fn(r, skill) for r in refs]
                # model- and run-level middleware wrap model calls and agent runs, not this
                fixed = skill._cache["middleware"] = [fn for fn in every if applies(fn, skill)]
        if call_middleware:
            from .middleware import applies, compose, expand_agent

            call_middleware = expand_agent(self, skill, list(call_middleware), done=fixed)
            if call_middleware:
                chain = fixed + [fn for fn in map(self._middleware_fn, call_middleware) if applies(fn, skill)]
                return compose(chain) if chain else None
        if not fixed:
            return None
        onion = skill._cache.get("onion")
        if onion is None:
            from .middleware import compose

            onion = skill._cache["onion"] = compose(list(fixed))
        return onion

    def _plugin_middleware(self) -> list[MiddlewareRef]:
        _ = self.catalog  # loads the plugins
        refs: list[MiddlewareRef] = []
        for contributed in self._pm.hook.agent_apps_middleware():
            refs += list(contributed or ())
        return refs

    def _middleware_fn(self, ref: MiddlewareRef, skill: Skill | None = None) -> MiddlewareFn:
        if callable(ref):
            return ref
        key = ref if isinstance(ref, str) else (ref[0], repr(sorted(ref[1].items())))
        fn = self._middleware_fns.get(key)
        if fn is None:
            from .middleware import skill_middleware

            try:
                fn = self._middleware_fns[key] = skill_middleware(self, ref)
            except AgentAppsError as exc:
                raise self._middleware_list_error(ref, skill, exc) from None
        return fn

    def _middleware_list_error(self, ref: MiddlewareRef, skill: Skill | None, exc: AgentAppsError) -> AgentAppsError:
        """``exc`` (an unknown middleware, or a skill that is not one) naming the list, and
        its file, that holds ``ref``; call-time middleware is the caller's own list."""
        if skill is None:
            return exc
        if ref in skill.middleware:
            where = skill.path or f"<{skill.origin} skill {skill.name}>"
            line = skill.key_lines.get("middleware", skill.line)
            return SkillLoadError(f"'middleware' list of {skill.name}: {exc}", path=where, line=line, skill=skill.name)
        for layer in self.cascade.layers(skill):
            if ref in (layer.data.get("middleware") or ()):
                return self.cascade.error(layer, ("middleware",), f"'middleware' list: {exc}")
        if ref in self._middleware:
            return AgentAppsError(f"ContextManager(middleware=[...]): {exc}")
        return AgentAppsError(f"middleware of a plugin (agent_apps_middleware): {exc}")


def _anonymous(definition: dict[str, Any]) -> Skill:
    """An anonymous skill from a dict: frontmatter keys plus a ``main`` callable."""
    fields = dict(definition)
    main = fields.pop("main", None)
    if not callable(main):
        raise AgentAppsError("an anonymous skill definition needs a callable 'main'")
    fields.setdefault("name", "anonymous")
    return skill_from_frontmatter(fields, default_name="anonymous", kind="anonymous", origin="anonymous", _main=main)
