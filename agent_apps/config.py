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
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .skill import Skill

__all__ = ["DEFAULTS", "Cascade", "Layer", "Resolved", "agent_apps_home"]

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
        # one tree of agents: agents started, nesting levels, MB of live sandboxes
        "spawn": {"max_agents": 32, "max_depth": 4, "max_memory_mb": 2048},
    },
    "middleware": [],
}

_CONCATENATED = {"middleware"}

# The types of the keys agent-apps itself reads, checked for every layer, so that a typo
# in a config file is an error naming the file and line instead of a surprise later.
_INT, _NUM, _BOOL, _STR, _MAP = "an integer", "a number", "true or false", "a string", "a mapping"
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
    ("model", "sandbox"): _MAP,
    ("model", "spawn"): _MAP,
    ("model", "spawn", "max_agents"): _INT,
    ("model", "spawn", "max_depth"): _INT,
    ("model", "spawn", "max_memory_mb"): _INT,
    ("security",): _MAP,
    ("security", "allowed_paths"): "a list of strings",
    ("security", "denied_paths"): "a list of strings",
    ("security", "env"): "a list of strings",
    ("security", "mode"): _STR,
    ("security", "workspace"): _STR,
    ("security", "timeout"): _NUM,
    ("security", "output_kb"): _INT,
    ("security", "policy"): _MAP,
    ("mcp_servers",): _MAP,
}


def config_problem(data: Mapping[str, Any], prefix: tuple[str, ...] = ()) -> tuple[tuple[str, ...], str] | None:
    """``(key path, expected)`` for the first known key of the wrong type, else None."""
    for key, value in data.items():
        path = (*prefix, str(key))
        expected = _KNOWN.get(path)
        if expected is not None and not _is(value, expected):
            return path, expected
        if isinstance(value, Mapping) and (len(path) < 2 or _KNOWN.get(path) == _MAP):
            problem = config_problem(value, path)
            if problem:
                return problem
    return None


def _is(value: Any, expected: str) -> bool:
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


def agent_apps_home() -> Path:
    """``$AGENT_APPS_HOME``, else ``~/.agent-apps``: user skills and config."""
    home = os.environ.get("AGENT_APPS_HOME")
    return Path(home) if home else Path.home() / ".agent-apps"


@dataclass(frozen=True)
class Layer:
    """One source of config values."""

    source: str
    data: Mapping[str, Any]


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

    def __init__(self, *, cwd: Path, home: Path, project: bool = True) -> None:
        self.cwd = cwd
        self.home = home
        self._project = project
        self._files: dict[Path, tuple[int, dict[str, Any]]] = {}

    def base_layers(self) -> list[Layer]:
        """Defaults, user and project layers (those that do not depend on the skill)."""
        layers = [Layer("defaults", DEFAULTS)]
        user = self.home / "config.yaml"
        data = self._read(user)
        if data is not None:
            layers.append(Layer(str(user), data))
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
                    layers.append(Layer(str(path), data))
            if skill.metadata:
                layers.append(Layer(f"{skill.name} metadata ({skill.where('metadata')})", skill.metadata))
        if call:
            layers.append(Layer("call", call))
        return layers

    def resolve(self, skill: Skill | None, call: Mapping[str, Any] | None = None) -> Resolved:
        resolved = Resolved()
        for layer in self.layers(skill, call):
            _merge(resolved, layer.data, layer.source, "", resolved.values)
        return resolved

    def project_file(self) -> Layer | None:
        """The nearest ``agent-apps.yaml`` or ``[tool.agent-apps]`` from cwd upward."""
        for directory in (self.cwd, *self.cwd.parents):
            candidate = directory / CONFIG_FILE
            data = self._read(candidate)
            if data is not None:
                return Layer(str(candidate), data)
            pyproject = directory / "pyproject.toml"
            if pyproject.is_file():
                table = self._read_pyproject(pyproject)
                if table is not None:
                    return Layer(f"{pyproject} [tool.agent-apps]", table)
        return None

    # -- internals -------------------------------------------------------------------

    def _directory_files(self, skill: Skill) -> list[Path]:
        if not skill.path or not skill.root:
            return []
        root = Path(skill.root)
        directory = Path(skill.path).parent
        chain = []
        while True:
            chain.append(directory / CONFIG_FILE)
            if directory == root or directory.parent == directory or root not in directory.parents:
                break
            directory = directory.parent
        return list(reversed(chain))

    def _read(self, path: Path) -> dict[str, Any] | None:
        try:
            mtime = path.stat().st_mtime_ns
        except OSError:
            return None
        cached = self._files.get(path)
        if cached is not None and cached[0] == mtime:
            return cached[1]
        import yaml

        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
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
            raise ConfigError(
                f"{'.'.join(keys)} must be {expected}", path=str(path), line=_line_of(path.read_text(), keys)
            )
        self._files[path] = (mtime, data)
        return data

    def _read_pyproject(self, path: Path) -> dict[str, Any] | None:
        try:
            with path.open("rb") as fh:
                table = tomllib.load(fh).get("tool", {}).get("agent-apps")
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"bad TOML: {exc}", path=str(path)) from None
        return table if isinstance(table, dict) else None


def _line_of(text: str, keys: tuple[str, ...]) -> int | None:
    """The line of a nested key in YAML text (for error messages)."""
    import yaml

    node = yaml.compose(text)
    line = None
    for key in keys:
        if not isinstance(node, yaml.MappingNode):
            break
        match = next(((k, v) for k, v in node.value if k.value == key), None)
        if match is None:
            break
        line, node = match[0].start_mark.line + 1, match[1]
    return line


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
            into[key] = copy.deepcopy(dict(value)) if isinstance(value, Mapping) else copy.deepcopy(value)
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
