"""The config cascade: every value a skill sees, and where it came from.

Layers, lowest precedence first:

1. bundled defaults (:data:`DEFAULTS`);
2. the user's ``~/.agent-apps/config.yaml``;
3. the project's ``agent-apps.yaml``, or ``[tool.agent-apps]`` in ``pyproject.toml``
   (the nearest one from the working directory upward);
4. ``agent-apps.yaml`` files in the skill's directory and its parents, up to the
   search-path root the skill was found in (outer directories first);
5. the skill's own ``metadata``;
6. the call (``invoke(..., config={...})``).

Mappings merge key by key; any other value replaces the one below it, except
``middleware`` lists, which are concatenated (outer layers wrap inner ones).
"""

from __future__ import annotations

import copy
import functools
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ._yaml_depth import MAX_YAML_DEPTH, too_deep
from .config_lines import MAX_CONFIG_BYTES, line_in_file, yaml_line
from .errors import ConfigError
from .host_files import HostFileRefused, read_host_text
from .skill import Skill

if TYPE_CHECKING:
    from .context import Context

__all__ = ["DEFAULTS", "KEY_TYPES", "Cascade", "Layer", "Resolved", "agent_apps_home", "call_config"]

CONFIG_FILE = "agent-apps.yaml"

#: The bundled defaults: the lowest layer of every cascade.
DEFAULTS: dict[str, Any] = {
    "model": {
        "agent": "agent-strands",
        "max_turns": 30,
        "max_steps": 30,
        "persistent": False,
        "context_edit": False,
        "sandbox": {"timeout": 30, "memory_mb": 256, "output_kb": 64},
        # sessions (docs/sessions.md)
        "retention": "permanent",
        # durable runs (docs/durability.md): the journal a resume replays
        "journal": True,
        "context_window": 200_000,
        "compaction": {"strategy": "summarize", "threshold": 0.7, "keep": 0.3, "reserve": 4096, "stale_turns": 4},
        # the system prompt's context (docs/context.md)
        "context": {"memory_chunks": 5, "retriever": "memory-search", "search": "auto", "file_chars": 8000},
        # the agent's own middleware, run where "$agent" stands in a middleware list
        "middleware": ["session"],
        # supervision (docs/supervision.md): how many agents one run may start, how deep,
        # and the MB of sandboxes its agents may hold at once
        "spawn": {"max_agents": 64, "max_depth": 6, "max_memory_mb": 2048},
        "parallel_tool_calls": True,
        # the most one model reply may stream: text, reasoning and tool input (docs/security.md)
        "max_output_kb": 1024,
    },
    "middleware": ["$agent"],
    # USD per million tokens, by model id (exact, else the longest matching glob): what
    # model.budget.cost_usd counts. Check your provider's price list; extend or override.
    "prices": {
        "*claude-sonnet-4*": {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75},
        "*claude-opus-4*": {"input": 15.0, "output": 75.0, "cache_read": 1.5, "cache_write": 18.75},
        "*claude-opus-4-5*": {"input": 5.0, "output": 25.0, "cache_read": 0.5, "cache_write": 6.25},
        "*claude-haiku-4-5*": {"input": 1.0, "output": 5.0, "cache_read": 0.1, "cache_write": 1.25},
        "*claude-3-5-haiku*": {"input": 0.8, "output": 4.0, "cache_read": 0.08, "cache_write": 1.0},
        "gpt-4o*": {"input": 2.5, "output": 10.0},
        "gpt-4o-mini*": {"input": 0.15, "output": 0.6},
    },
}

_CONCATENATED = {"middleware"}

# Every key agent-apps reads, with its type. A config file, a skill's metadata (below its
# config sections) or a call holding a key of the wrong type, or a key of no table, is an
# error naming the file, the line, the key and the nearest known key: a typo must not
# pass silently. Adding a key is one line here. ``*`` stands for any name (the servers
# under mcp_servers); the contents of a key typed _ANY are not checked. Packages declare
# their own keys with the ``agent_apps_config_keys`` hook, provider skills the ``model.*``
# keys they read in ``metadata.config_keys``.
_INT, _NUM, _BOOL, _STR, _MAP = "an integer", "a number", "true or false", "a string", "a mapping"
_LIST, _ANY = "a list", "any value"
MAPPING = _MAP
#: The types a key may be declared with (``agent_apps_config_keys`` values; None is _ANY).
#: Each may end with " or null" ("a string or null"): then null is valid too.
KEY_TYPES: tuple[str, ...] = (_INT, _NUM, _BOOL, _STR, _MAP, "a list of strings", _LIST, _ANY)
_KNOWN: dict[tuple[str, ...], str] = {
    ("middleware",): "a list of strings",
    ("model",): _MAP,
    ("model", "agent"): _STR,
    ("model", "model_id"): _STR,
    ("model", "region"): _STR,
    ("model", "max_turns"): _INT,
    ("model", "max_steps"): _INT,
    ("model", "max_retries"): _INT,
    ("model", "retry_delay"): _NUM,
    ("model", "persistent"): _BOOL,
    ("model", "context_edit"): _BOOL,
    ("model", "context_keep"): _INT,
    ("model", "temperature"): _NUM,
    ("model", "max_tokens"): _INT,
    ("model", "thinking"): _MAP,  # extended thinking: mapped to each provider's reasoning settings
    ("model", "thinking", "budget_tokens"): _INT,
    ("model", "sandbox"): _MAP,
    ("model", "sandbox", "timeout"): _NUM,
    ("model", "sandbox", "memory_mb"): _INT,
    ("model", "sandbox", "output_kb"): _INT,
    ("model", "sandbox", "max_calls"): _INT,
    ("model", "sandbox", "max_payload_kb"): _INT,
    ("model", "sandbox", "max_recursion"): _INT,
    ("model", "retention"): _STR,
    ("model", "journal"): _BOOL,
    ("model", "context_window"): _INT,
    ("model", "compaction"): _MAP,
    ("model", "compaction", "strategy"): _STR,
    ("model", "compaction", "threshold"): _NUM,
    ("model", "compaction", "keep"): _NUM,
    ("model", "compaction", "reserve"): _INT,
    ("model", "compaction", "stale_turns"): _INT,
    ("model", "compaction", "window_messages"): _INT,
    ("model", "compaction", "during_run"): _BOOL,
    ("model", "compaction", "model"): _MAP,  # model keys for the summarizer's call
    ("model", "compaction", "model", "*"): _ANY,
    ("model", "history"): _STR,
    ("model", "workspace"): _STR,
    ("model", "context"): _MAP,
    ("model", "context", "rules"): _STR,
    ("model", "context", "sensitive_data"): _STR,
    ("model", "context", "memory_chunks"): _INT,
    ("model", "context", "retriever"): _STR,
    ("model", "context", "search"): _STR,
    ("model", "context", "embedding_model"): _STR,
    ("model", "context", "file_chars"): _INT,
    ("model", "middleware"): "a list of strings",
    ("model", "budget"): _MAP,
    ("model", "budget", "tokens"): _INT,
    ("model", "budget", "input_tokens"): _INT,
    ("model", "budget", "output_tokens"): _INT,
    ("model", "budget", "turns"): _INT,
    ("model", "budget", "cost_usd"): _NUM,
    ("model", "budget", "deadline_s"): _NUM,
    ("model", "spawn"): _MAP,
    ("model", "spawn", "max_agents"): _INT,
    ("model", "spawn", "max_depth"): _INT,
    ("model", "spawn", "max_memory_mb"): _INT,
    ("model", "priority"): _STR,
    ("model", "parallel_tool_calls"): _BOOL,
    ("model", "max_output_kb"): _INT,
    ("model", "tool_timeout"): _NUM,
    ("model", "guardrails"): "a list of strings",
    ("prices",): _MAP,  # USD per million tokens, by model id or glob
    ("prices", "*"): _MAP + " or null",  # null removes an entry
    ("prices", "*", "input"): _NUM,
    ("prices", "*", "output"): _NUM,
    ("prices", "*", "cache_read"): _NUM,
    ("prices", "*", "cache_write"): _NUM,
    ("admission",): _MAP,
    ("admission", "sandboxes"): _INT,
    ("admission", "model_calls"): _ANY,  # an integer, or {default: N, PROVIDER: N}
    ("state",): _MAP,
    ("state", "path"): _STR,
    ("security",): _MAP,
    ("security", "allowed_paths"): "a list of strings or null",
    ("security", "denied_paths"): "a list of strings",
    ("security", "env"): "a list of strings",
    ("security", "mode"): _STR,
    ("security", "workspace"): "a string or null",
    ("security", "timeout"): _NUM,
    ("security", "output_kb"): _INT,
    ("security", "policy"): _MAP,
    ("security", "builtin_denied_paths"): _BOOL,
    ("security", "http"): _MAP,
    ("security", "http", "timeout"): _NUM,
    ("security", "http", "max_kb"): _INT,
    ("security", "http", "allow_private"): _BOOL,
    ("security", "policy", "allow"): "a list of strings",
    ("security", "policy", "ask"): "a list of strings",
    ("security", "policy", "deny"): "a list of strings",
    ("security", "policy", "interactive"): _MAP,
    ("security", "policy", "unattended"): _MAP,
    ("security", "policy", "*", "allow"): "a list of strings",  # * is the mode
    ("security", "policy", "*", "ask"): "a list of strings",
    ("security", "policy", "*", "deny"): "a list of strings",
    ("security", "policy", "*", "categories"): _ANY,
    ("mcp_servers",): _MAP,
    ("mcp_servers", "*"): _MAP,  # a server
    ("mcp_servers", "*", "command"): _STR,
    ("mcp_servers", "*", "args"): _LIST,
    ("mcp_servers", "*", "env"): _ANY,
    ("mcp_servers", "*", "cwd"): _STR,
    ("mcp_servers", "*", "url"): _STR,
    ("mcp_servers", "*", "headers"): _ANY,
    ("mcp_servers", "*", "timeout"): _NUM,
    ("mcp_servers", "*", "startup_timeout"): _NUM,
    ("mcp_servers", "*", "mode"): _STR,
    # what a server may add to a prompt and to the disk (docs/security.md, "What a peer can do")
    ("mcp_servers", "*", "description_chars"): _INT,
    ("mcp_servers", "*", "schema_kb"): _INT,
    ("mcp_servers", "*", "max_tools"): _INT,
    ("mcp_servers", "*", "log_kb"): _INT,
}


def config_problem(
    data: Mapping[str, Any], prefix: tuple[str, ...] = (), keys: Mapping[tuple[str, ...], str] | None = None
) -> tuple[tuple[str, ...], str] | None:
    """``(key path, what it must be)`` for the first known key of the wrong type (``"an
    integer >= 0, not -5"``), else None."""
    keys = _KNOWN if keys is None else keys
    for key, value in data.items():
        path = (*prefix, str(key))
        expected = expected_type(keys, path)
        if expected is not None and not _is(value, expected):
            shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
            return path, f"{expected}{' >= 0' if expected == _INT else ''}, not {shown}"
        if isinstance(value, Mapping) and expected == _MAP:
            problem = config_problem(value, path, keys)
            if problem:
                return problem
    return None


def unknown_key(
    data: Mapping[str, Any], keys: Mapping[tuple[str, ...], str], *, open_root: bool = False
) -> tuple[tuple[str, ...], str] | None:
    """``(key path, hint)`` for the first key no table knows, else None.

    ``open_root``: top-level keys are free (a skill's metadata), only the known sections
    below them are checked. The hint names the nearest known key, if one is close.
    """

    def walk(node: Mapping[str, Any], prefix: tuple[str, ...]) -> tuple[tuple[str, ...], str] | None:
        for key, value in node.items():
            path = (*prefix, str(key))
            expected = expected_type(keys, path)
            if expected is None:
                if prefix or not open_root:
                    return path, _nearest(keys, path)
                continue
            if expected == _MAP and isinstance(value, Mapping):
                problem = walk(value, path)
                if problem:
                    return problem
        return None

    return walk(data, ())


def expected_type(keys: Mapping[tuple[str, ...], str], path: tuple[str, ...]) -> str | None:
    """The declared type of ``path`` (``*`` in a declared key matches any one name)."""
    found = keys.get(path)
    if found is None:
        for i in range(len(path)):
            found = keys.get((*path[:i], "*", *path[i + 1 :]))
            if found is not None:
                break
    return found


def key_table(
    declared: Iterable[Mapping[str, str | None] | None] = (), skills: Iterable[Skill] = ()
) -> dict[tuple[str, ...], str]:
    """Every known key: agent-apps' own, plus what plugins declare (``{dotted: type}``
    from the ``agent_apps_config_keys`` hook) and what skills declare (the dotted keys in
    their ``metadata.config_keys``, of any type). The sections above a key come with it."""
    table = dict(_KNOWN)

    def add(dotted: str, expected: str, who: str) -> None:
        if expected.removesuffix(" or null") not in KEY_TYPES:
            kinds = ", ".join(KEY_TYPES)
            raise ConfigError(f"{who} declares config key {dotted!r} as {expected!r}: use one of {kinds}")
        path = tuple(str(dotted).split("."))
        for i in range(1, len(path)):
            table.setdefault(path[:i], _MAP)
        table.setdefault(path, expected)

    for keys in declared:
        for dotted, expected in (keys or {}).items():
            add(dotted, expected or _ANY, "a plugin (agent_apps_config_keys)")
    for skill in skills:
        for dotted in skill.metadata.get("config_keys") or ():
            add(dotted, _ANY, f"skill {skill.name} (metadata.config_keys)")
    return table


def _nearest(keys: Mapping[tuple[str, ...], str], path: tuple[str, ...]) -> str:
    """`` (did you mean 'model.max_turns'?)`` for a mistyped key, or the known keys beside it."""
    import difflib

    siblings = sorted(
        {k[-1] for k in keys if len(k) == len(path) and k[-1] != "*" and expected_type(keys, (*path[:-1], k[-1]))}
    )
    close = difflib.get_close_matches(path[-1], siblings, n=1)
    if close:
        return f" (did you mean {'.'.join((*path[:-1], close[0]))!r}?)"
    # A key in the wrong section (``max_turns`` at the top instead of under ``model``).
    dotted = {".".join(k): k[-1] for k in keys if "*" not in k}
    close = difflib.get_close_matches(path[-1], sorted(set(dotted.values())), n=1, cutoff=0.8)
    if close:
        return f" (did you mean {min(d for d, last in dotted.items() if last == close[0])!r}?)"
    return f"; known keys here: {', '.join(siblings)}" if siblings else ""


def _is(value: Any, expected: str) -> bool:
    if expected == _ANY or (value is None and expected.endswith(" or null")):
        return True
    expected = expected.removesuffix(" or null")
    if expected == _LIST:
        return isinstance(value, list)
    if expected == _MAP:
        return isinstance(value, Mapping)
    if expected == _BOOL:
        return isinstance(value, bool)
    if expected == _INT:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 0
    if expected == _NUM:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if expected == _STR:
        return isinstance(value, str)
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def call_config(ctx: Context, top: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """The call layers (``invoke(..., config={...})``) of ``ctx`` and its ancestors
    merged, outermost first, then ``top``: a call's config holds for everything invoked
    below it, so a job that passes ``{"model": ...}`` or ``{"security": ...}`` reaches
    the agent and the tools it calls, not only the skill it named.

    ``model`` is the exception: it configures the agent that serves the call, not the
    agents that agent's code starts in turn (a scripted model or a model id meant for
    the outer agent would otherwise replace every nested prompt skill's own), so a
    layer above an enclosing agent run contributes everything but ``model``."""
    if not top and not ctx.configured:  # the common case: no call layer anywhere
        return None
    layers = [top] if top else []
    node: Context | None = ctx
    inside_agent = False
    while node is not None:
        inside_agent = inside_agent or (node is not ctx and node.skill.name == "agent")
        layer = node.internals.get("config")
        if layer:
            layers.append({k: v for k, v in layer.items() if k != "model"} if inside_agent else layer)
        node = node.parent
    if not layers:
        return None
    merged: dict[str, Any] = {}
    for layer in reversed(layers):
        _deep_merge(merged, layer)
    return merged


def _deep_merge(into: dict[str, Any], data: Mapping[str, Any]) -> None:
    for key, value in data.items():
        if isinstance(value, Mapping) and isinstance(into.get(key), dict):
            _deep_merge(into[key], value)
        else:
            into[key] = _copied(value)


#: Config values that are kept, not copied: exactly these types (a subclass goes the
#: long way, through :func:`_copied`).
_KEPT = frozenset({str, int, float, bool, type(None)})


def _copied(value: Any) -> Any:
    """A copy of a config value that shares nothing mutable with it (a mapping becomes
    a dict). JSON-like values are copied by hand: ``copy.deepcopy`` costs several times
    more, and a run resolves the cascade a few times (each a copy of every default). A
    dict's or list's scalars are taken as they are, without a call each."""
    kind = type(value)
    if kind in _KEPT:
        return value
    if kind is dict or (kind is not list and isinstance(value, Mapping)):
        return {key: item if type(item) in _KEPT else _copied(item) for key, item in value.items()}
    if isinstance(value, list):
        return [item if type(item) in _KEPT else _copied(item) for item in value]
    if isinstance(value, (str, int, float)):
        return value
    return copy.deepcopy(value)


def agent_apps_home() -> Path:
    """``$AGENT_APPS_HOME``, else ``~/.agent-apps``: user skills and config."""
    home = os.environ.get("AGENT_APPS_HOME")
    return Path(home) if home else Path.home() / ".agent-apps"


@dataclass(frozen=True)
class Layer:
    """One source of config values; ``path`` and ``line`` locate it for error messages."""

    source: str
    data: Mapping[str, Any]
    kind: Literal["defaults", "file", "metadata", "call"] = "file"
    path: str | None = None
    line: int | None = None


@dataclass
class Resolved:
    """The merged values and, for each dotted key, the layer that set it."""

    values: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)

    def get(self, dotted: str, default: Any = None) -> Any:
        value: Any = self.values
        for part in dotted.split("."):
            if not isinstance(value, dict) or part not in value:
                return default
            value = value[part]
        return value


class Cascade:
    """Reads and caches config files; resolves the cascade for a skill."""

    def __init__(
        self,
        *,
        cwd: Path,
        home: Path,
        project: bool = True,
        keys: Callable[[], Mapping[tuple[str, ...], str] | None] | None = None,
    ) -> None:
        self.cwd = cwd
        self.home = home
        self._project = project
        self._files: dict[Path, tuple[int, Any]] = {}  # config files, by path: (mtime, what was read)
        #: Every known key (see ``_KNOWN``), or None while it cannot be known yet.
        self._keys = keys
        self._checked: dict[str, tuple[Mapping[str, Any], Mapping[tuple[str, ...], str]]] = {}
        #: The merge of each list of layers (by their sources): the data it was made of, and it.
        self._merges: dict[tuple[str, ...], tuple[tuple[Mapping[str, Any], ...], Resolved]] = {}

    def base_layers(self) -> list[Layer]:
        """Defaults, user and project layers (those that do not depend on the skill)."""
        layers = [Layer("defaults", DEFAULTS, "defaults")]
        user = self.home / "config.yaml"
        data = self._read(user)
        if data is not None:
            layers.append(Layer(str(user), data, path=str(user)))
        if self._project:
            project = self.project_file()
            if project is not None:
                layers.append(project)
        return layers

    def layers(self, skill: Skill | None, call: Mapping[str, Any] | None = None) -> list[Layer]:
        layers = self.base_layers()
        if skill is not None:
            seen = {layer.source for layer in layers}
            for path in self._directory_files(skill):
                data = self._read(path)
                if data is not None and str(path) not in seen:
                    layers.append(Layer(str(path), data, path=str(path)))
            if skill.metadata:
                source = f"{skill.name} metadata ({skill.where('metadata')})"
                line = skill.key_lines.get("metadata", skill.line)
                layers.append(Layer(source, skill.metadata, "metadata", skill.path, line))
        if call:
            layers.append(Layer("call", call, "call"))
        return layers

    def resolve(self, skill: Skill | None, call: Mapping[str, Any] | None = None) -> Resolved:
        """The merged config of ``skill`` (None: no skill's layers) under ``call``.
        The merge of the file and metadata layers is kept while none of them changed
        (each file is still checked by its mtime, :func:`_by_mtime`), so a resolve
        costs one copy of it plus the call layer."""
        keys = self._keys() if self._keys is not None else None
        layers = self.layers(skill)
        for layer in layers:
            if keys is not None:
                self.check(layer, keys)
        merged = self._merged(layers)
        resolved = Resolved(_copied(merged.values), dict(merged.sources))
        if call:
            layer = Layer("call", call, "call")
            if keys is not None:
                self.check(layer, keys)
            _merge(resolved, call, layer.source, "", resolved.values)
        return resolved

    def _merged(self, layers: list[Layer]) -> Resolved:
        """The merge of ``layers`` (none of them a call's), made again only once one of
        them is another object: a changed file is read into a new one, a reloaded skill
        has new metadata."""
        sources = tuple(layer.source for layer in layers)
        data = tuple(layer.data for layer in layers)
        cached = self._merges.get(sources)
        if cached is not None and all(a is b for a, b in zip(cached[0], data, strict=True)):
            return cached[1]
        resolved = Resolved()
        for layer in layers:
            _merge(resolved, layer.data, layer.source, "", resolved.values)
        self._merges[sources] = (data, resolved)
        return resolved

    def check(self, layer: Layer, keys: Mapping[tuple[str, ...], str]) -> None:
        """Raise :class:`ConfigError` for a key of no table, or a declared key of the wrong
        type, naming the file and line (or the call). Files are checked once per change."""
        done = self._checked.get(layer.source)
        if layer.kind == "defaults" or (done is not None and done[0] is layer.data and done[1] is keys):
            return
        unknown = unknown_key(layer.data, keys, open_root=layer.kind == "metadata")
        typed = config_problem(layer.data, (), keys) if unknown is None else None
        if unknown is not None:
            path, message = unknown[0], f"unknown config key {'.'.join(unknown[0])!r}{unknown[1]}"
        elif typed is not None:
            path, message = typed[0], f"{'.'.join(typed[0])} must be {typed[1]}"
        else:
            if layer.kind != "call":
                self._checked[layer.source] = (layer.data, keys)
            return
        raise self.error(layer, path, message)

    def error(self, layer: Layer, keys: tuple[str, ...], message: str) -> ConfigError:
        """A :class:`ConfigError` about ``keys`` of ``layer``: its file and line, or the call."""
        if layer.kind == "call":
            error = ConfigError(f"the call's config: {message}")
            error.call_error = True
            return error
        if layer.kind == "metadata":
            return ConfigError(f"metadata: {message}", path=layer.path or layer.source, line=layer.line)
        return ConfigError(message, path=layer.path or layer.source, line=line_in_file(layer.path, keys))

    def project_file(self) -> Layer | None:
        """The nearest ``agent-apps.yaml`` or ``[tool.agent-apps]`` from cwd upward."""
        for directory in (self.cwd, *self.cwd.parents):
            candidate = directory / CONFIG_FILE
            data = self._read(candidate)
            if data is not None:
                return Layer(str(candidate), data, path=str(candidate))
            pyproject = directory / "pyproject.toml"
            if pyproject.is_file():
                table = self._read_pyproject(pyproject)
                if table is not None:
                    return Layer(f"{pyproject} [tool.agent-apps]", table, path=str(pyproject))
        return None

    # -- internals -------------------------------------------------------------------

    def _directory_files(self, skill: Skill) -> tuple[Path, ...]:
        if not skill.path or not skill.root:
            return ()
        return _config_chain(skill.path, skill.root)

    def _read(self, path: Path) -> dict[str, Any] | None:
        return _by_mtime(self._files, path, _load_yaml)

    def _read_pyproject(self, path: Path) -> dict[str, Any] | None:
        """``[tool.agent-apps]``, read once per change of the file, as :meth:`_read` does."""
        return _by_mtime(self._files, path, _load_pyproject)


@functools.lru_cache(maxsize=1024)
def _config_chain(path: str, root: str) -> tuple[Path, ...]:
    """The config files that may sit between a skill's root and its folder, outermost
    first: kept per skill location, since a run resolves the cascade a few times."""
    top = Path(root)
    directory = Path(path).parent
    chain = []
    while True:
        chain.append(directory / CONFIG_FILE)
        if directory == top or directory.parent == directory or top not in directory.parents:
            break
        directory = directory.parent
    return tuple(reversed(chain))


def _by_mtime(cache: dict[Path, tuple[int, Any]], path: Path, load: Callable[[Path], Any]) -> Any:
    """``load(path)``, again only once the file changed (None if there is no file): a
    command resolves the cascade several times."""
    try:
        mtime = path.stat().st_mtime_ns
    except OSError:
        return None
    cached = cache.get(path)
    if cached is None or cached[0] != mtime:
        cached = cache[path] = (mtime, load(path))
    return cached[1]


def _read_config(path: Path) -> str:
    """A config file's text, read as the host reads for an agent (:mod:`.host_files`):
    a file refused there is an error here, not a file skipped, since skipping it would
    drop its settings (a ``security.policy.deny`` among them)."""
    try:
        return read_host_text(path, limit=MAX_CONFIG_BYTES, folder=path.parent)
    except HostFileRefused as exc:
        raise ConfigError(
            f"refused: it {exc.reason}; a config file is a regular file of at most {MAX_CONFIG_BYTES // 1024} KB, "
            "inside its folder once links are resolved (link the folder instead of the file)",
            path=str(path),
        ) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", path=str(path)) from None
    except OSError as exc:
        raise ConfigError(f"cannot read it: {exc.strerror or exc}", path=str(path)) from None


def _load_yaml(path: Path) -> dict[str, Any]:
    import yaml

    text = _read_config(path)
    deep = too_deep(text, MAX_YAML_DEPTH)  # before PyYAML, which builds documents recursively
    if deep is not None:
        raise ConfigError(f"nests deeper than {MAX_YAML_DEPTH} levels", path=str(path), line=deep)
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise ConfigError(
            f"bad YAML: {getattr(exc, 'problem', None) or exc}",
            path=str(path),
            line=mark.line + 1 if mark is not None else None,
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"must hold a mapping, not {type(data).__name__}", path=str(path))
    problem = config_problem(data)
    if problem is not None:
        keys, expected = problem
        raise ConfigError(f"{'.'.join(keys)} must be {expected}", path=str(path), line=yaml_line(text, keys))
    return data


def _load_pyproject(path: Path) -> dict[str, Any] | None:
    """The ``[tool.agent-apps]`` table, kept between processes like skill files' parses
    (most projects' pyproject.toml has none, and reading one costs importing tomllib)."""
    from .parse_cache import ParseCache

    cache = ParseCache(path.parent, kind="pyproject")
    kept = cache.get(str(path))
    if kept is not None:
        return kept[0]  # type: ignore[no-any-return]
    import tomllib

    text = _read_config(path)
    try:
        table = tomllib.loads(text).get("tool", {}).get("agent-apps")
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"bad TOML: {exc}", path=str(path)) from None
    table = table if isinstance(table, dict) else None
    cache.put(str(path), (table,))
    cache.save()
    return table


def _merge(resolved: Resolved, data: Mapping[str, Any], source: str, prefix: str, into: dict[str, Any]) -> None:
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and isinstance(into.get(key), dict):
            _merge(resolved, value, source, f"{dotted}.", into[key])
        elif key in _CONCATENATED and isinstance(value, list) and isinstance(into.get(key), list):
            into[key] = into[key] + list(value)
            if value:
                resolved.sources[dotted] = _join_sources(resolved.sources.get(dotted), source)
        else:
            into[key] = _copied(value)
            _drop_sources(resolved, f"{dotted}.")
            if isinstance(value, Mapping):
                _record(resolved, value, source, f"{dotted}.")
            else:
                resolved.sources[dotted] = source


def _record(resolved: Resolved, data: Mapping[str, Any], source: str, prefix: str) -> None:
    for key, value in data.items():
        if isinstance(value, Mapping) and value:
            _record(resolved, value, source, f"{prefix}{key}.")
        else:
            resolved.sources[f"{prefix}{key}"] = source


def _drop_sources(resolved: Resolved, prefix: str) -> None:
    for key in [k for k in resolved.sources if k.startswith(prefix)]:
        del resolved.sources[key]


def _join_sources(old: str | None, new: str) -> str:
    return f"{old} + {new}" if old else new
