"""CLI tools declared in ``tools.yaml`` become skills (seed 002 section 6.3).

::

    tools:
      - name: kubectl_get                 # becomes the skill kubectl-get
        description: Get Kubernetes resources
        category: read                    # read | write | admin (the permission policy)
        cmd: kubectl                      # found on the subprocess PATH
        args: ["get", "{{resource}}"]
        optional_args:                    # added only when the arg is given
          namespace: ["-n", "{{namespace}}"]
        parameters:
          resource: {type: string, enum: [pods, services]}
          namespace: {type: string, pattern: "^[a-z0-9-]+$", optional: true}
        env: {KUBECONFIG: "${KUBECONFIG}"}  # or a list of host variable names
        timeout: 60                       # seconds (default security.timeout)

Why this is safe to hand to a model: the args are validated by the pipeline against
the JSON Schema built from ``parameters`` (``enum``, ``pattern``, ``maxLength``, ...)
before anything runs; each ``{{name}}`` is replaced inside *one* argv element, and the
program runs without a shell, so ``;``, ``|``, ``$(...)`` stay literal characters. A
string value that starts with ``-`` is refused unless the parameter says
``allow_option: true``, so a value cannot turn into an option (``--kubeconfig=...``).
Note that JSON Schema patterns are *searches*: anchor them (``^...$``). They run on
RE2 (linear time, whatever the value), where ``$`` is the very end of the text (a
trailing newline does not match).
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._schema import check_pattern
from .._yaml_depth import MAX_YAML_DEPTH, too_deep
from ..config import MAX_CONFIG_BYTES
from ..errors import AgentAppsError, ArgsInvalid, SkillLoadError
from ..frontmatter import skill_from_frontmatter
from ..host_files import HostFileRefused, read_host_text
from ..skill import Skill
from .paths import PathPolicy
from .settings import security_for
from .subprocess import build_env, run

if TYPE_CHECKING:
    from ..context import Context

__all__ = ["CliTool", "load_tools_file"]

_TOOL_KEYS = {"name", "description", "category", "cmd", "args", "optional_args", "parameters", "env", "timeout"}
_PARAM_KEYS = {
    "type",
    "description",
    "enum",
    "pattern",
    "maxLength",
    "minLength",
    "minimum",
    "maximum",
    "default",
    "optional",
    "allow_option",
}
_TYPES = {"string", "integer", "number", "boolean"}
_CATEGORIES = {"read", "write", "admin"}
_TEMPLATE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_-]*)\s*\}\}")


@dataclass(frozen=True)
class CliTool:
    """One validated ``tools.yaml`` entry."""

    name: str
    cmd: str
    args: tuple[str, ...]
    optional_args: Mapping[str, tuple[str, ...]]
    option_ok: frozenset[str]
    env: Mapping[str, str] | tuple[str, ...] = field(default=())
    timeout: float | None = None

    def argv(self, skill: str, values: Mapping[str, Any]) -> list[str]:
        """The argument vector for validated ``values`` (without the program)."""
        for key, value in values.items():
            if isinstance(value, str) and value.startswith("-") and key not in self.option_ok:
                raise ArgsInvalid(skill, key, f"{value!r} starts with '-' and would be read as an option")
            if isinstance(value, str) and "\x00" in value:
                raise ArgsInvalid(skill, key, "NUL characters are not allowed")
        out = [_render(a, values) for a in self.args]
        for key, extra in self.optional_args.items():
            # a boolean flag is "given" only when true: `force: false` must not add --force
            if key in values and values[key] is not False and values[key] is not None:
                out += [_render(a, values) for a in extra]
        return out

    async def __call__(self, ctx: Context, args: dict[str, Any]) -> dict[str, Any]:
        security = security_for(ctx)
        names = [*security.get("env", [])]
        env = build_env(names)
        env.update(build_env(self.env if isinstance(self.env, Mapping) else list(self.env)))
        program = self.cmd if os.sep in self.cmd else shutil.which(self.cmd, path=env.get("PATH", os.defpath))
        if program is None:
            raise AgentAppsError(f"{ctx.skill.name}: program {self.cmd!r} not found on PATH", skill=ctx.skill.name)
        cm = ctx.manager.context_manager
        workspace = PathPolicy.from_security(security, cwd=cm.cwd, agent_home=cm.home).workspace
        result = await run(
            [program, *self.argv(ctx.skill.name, args)],
            env=env,
            cwd=workspace,
            timeout=float(self.timeout or security["timeout"]),
            output_limit=int(security["output_kb"]) * 1024,
            signal=ctx.signal,
            name=ctx.skill.name,
        )
        return result.to_json()


def _render(template: str, values: Mapping[str, Any]) -> str:
    def value(match: re.Match[str]) -> str:
        v = values[match.group(1)]
        return ("true" if v else "false") if isinstance(v, bool) else str(v)

    return _TEMPLATE.sub(value, template)


def load_tools_file(path: Path) -> tuple[list[Skill], list[SkillLoadError]]:
    """The skills a ``tools.yaml`` declares, and an error (file and line) for each
    broken entry; one broken entry never hides the others."""
    import yaml

    where = str(path)
    try:
        text = read_host_text(path, limit=MAX_CONFIG_BYTES, folder=path.parent)
        deep = too_deep(text, MAX_YAML_DEPTH)  # before PyYAML, which builds documents recursively
        if deep is not None:
            return [], [SkillLoadError(f"nests deeper than {MAX_YAML_DEPTH} levels", path=where, line=deep)]
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except HostFileRefused as exc:
        return [], [SkillLoadError(f"refused: it {exc.reason}", path=where)]
    except (OSError, UnicodeDecodeError) as exc:
        return [], [SkillLoadError(f"cannot read: {exc}", path=where)]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        return [], [
            SkillLoadError(
                f"bad YAML: {getattr(exc, 'problem', None) or exc}", path=where, line=mark.line + 1 if mark else None
            )
        ]
    if data is None:
        return [], []
    lines: dict[str, int] = {}
    _lines(root, "", lines)
    if not isinstance(data, dict) or not isinstance(data.get("tools"), list):
        return [], [SkillLoadError("must be a mapping with a 'tools' list", path=where, line=lines.get("", 1))]
    skills: list[Skill] = []
    errors: list[SkillLoadError] = []
    seen: set[str] = set()
    for index, entry in enumerate(data["tools"]):
        prefix = f"tools.{index}"
        try:
            skill = _tool_skill(entry, where, prefix, lines)
            if skill.name in seen:
                raise SkillLoadError(f"duplicate tool {skill.name!r}", path=where, line=lines.get(f"{prefix}.name"))
            seen.add(skill.name)
            skills.append(skill)
        except SkillLoadError as exc:
            errors.append(exc)
    return skills, errors


def _nearest(key: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(key, sorted(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _tool_skill(entry: object, path: str, prefix: str, lines: dict[str, int]) -> Skill:
    def fail(message: str, key: str = "") -> SkillLoadError:
        dotted = f"{prefix}.{key}" if key else prefix
        line = lines.get(dotted) or lines.get(dotted.rsplit(".", 1)[0]) or lines.get(prefix)
        label = entry.get("name", prefix) if isinstance(entry, dict) else prefix
        return SkillLoadError(f"tool {label}: {message}", path=path, line=line)

    if not isinstance(entry, dict):
        raise fail("each tool must be a mapping")
    unknown = set(entry) - _TOOL_KEYS
    if unknown:
        key = sorted(map(str, unknown))[0]
        raise fail(f"unknown key {key!r}{_nearest(key, _TOOL_KEYS)}; known keys: {', '.join(sorted(_TOOL_KEYS))}", key)
    for key in ("name", "cmd"):
        if not isinstance(entry.get(key), str) or not entry[key]:
            raise fail(f"'{key}' is required and must be a string", key)
    name = entry["name"].replace("_", "-")
    category = entry.get("category")
    if category not in _CATEGORIES:
        raise fail(f"'category' must be one of read, write, admin (got {category!r})", "category")
    params = entry.get("parameters") or {}
    if not isinstance(params, dict):
        raise fail("'parameters' must be a mapping of name to schema", "parameters")
    properties: dict[str, Any] = {}
    required: list[str] = []
    option_ok: set[str] = set()
    for pname, spec in params.items():
        key = f"parameters.{pname}"
        if not isinstance(spec, dict):
            raise fail(f"parameter {pname!r} must be a mapping", key)
        bad = sorted(map(str, set(spec) - _PARAM_KEYS))
        if bad:
            raise fail(f"parameter {pname!r}: unknown key {bad[0]!r}{_nearest(bad[0], _PARAM_KEYS)}", key)
        schema = {k: v for k, v in spec.items() if k not in ("optional", "allow_option")}
        schema.setdefault("type", "string")
        if schema["type"] not in _TYPES:
            raise fail(f"parameter {pname!r}: type must be one of {', '.join(sorted(_TYPES))}", f"{key}.type")
        if "pattern" in schema:
            try:
                check_pattern(str(schema["pattern"]))
            except ValueError as exc:
                raise fail(f"parameter {pname!r}: bad pattern: {exc}", f"{key}.pattern") from None
        if spec.get("allow_option"):
            option_ok.add(pname)
        properties[pname] = schema
        if not spec.get("optional") and "default" not in spec:
            required.append(pname)
    args = entry.get("args") or []
    if not isinstance(args, list) or not all(isinstance(a, (str, int, float)) for a in args):
        raise fail("'args' must be a list of strings", "args")
    optional_args = entry.get("optional_args") or {}
    if not isinstance(optional_args, dict):
        raise fail("'optional_args' must map a parameter name to a list of strings", "optional_args")
    always = set(required) | {k for k, v in properties.items() if "default" in v}  # present in every call
    for a in args:
        for ref in _TEMPLATE.findall(str(a)):
            if ref not in properties:
                raise fail(f"'args' uses {{{{{ref}}}}} but there is no parameter {ref!r}", "args")
            if ref not in always:
                raise fail(f"'args' uses optional parameter {ref!r}; put it under optional_args", "args")
    for pname, extra in optional_args.items():
        if pname not in properties:
            raise fail(f"optional_args.{pname}: no parameter {pname!r}", f"optional_args.{pname}")
        if not isinstance(extra, list):
            raise fail(f"optional_args.{pname} must be a list of strings", f"optional_args.{pname}")
        for a in extra:
            for ref in _TEMPLATE.findall(str(a)):
                if ref != pname and ref not in always:
                    raise fail(
                        f"optional_args.{pname} may use {{{{{pname}}}}} and required parameters only",
                        f"optional_args.{pname}",
                    )
    env = entry.get("env") or []
    if isinstance(env, list) and all(isinstance(e, str) for e in env):
        env = tuple(env)
    elif not (isinstance(env, dict) and all(isinstance(v, (str, int)) for v in env.values())):
        raise fail("'env' must be a list of variable names or a mapping of name to '${HOST_VAR}'", "env")
    timeout = entry.get("timeout")
    if timeout is not None and (not isinstance(timeout, (int, float)) or timeout <= 0):
        raise fail("'timeout' must be a positive number of seconds", "timeout")
    tool = CliTool(
        name=name,
        cmd=os.path.expanduser(entry["cmd"]),
        args=tuple(str(a) for a in args),
        optional_args={k: tuple(str(a) for a in v) for k, v in optional_args.items()},
        option_ok=frozenset(option_ok),
        env={str(k): str(v) for k, v in env.items()} if isinstance(env, dict) else env,
        timeout=float(timeout) if timeout is not None else None,
    )
    frontmatter = {
        "name": name,
        "description": str(entry.get("description", "")),
        "params": {"type": "object", "properties": properties, "required": required, "additionalProperties": False},
        "metadata": {"category": category, "tags": ["cli-tool"]},
    }
    line = lines.get(prefix)
    try:
        return skill_from_frontmatter(
            frontmatter, default_name=name, path=path, line=line, kind="code", origin=f"tools.yaml:{path}", _main=tool
        )
    except SkillLoadError as exc:
        raise fail(exc.reason, "name") from None


def _lines(node: Any, prefix: str, out: dict[str, int]) -> None:
    """Record the line of every mapping key and sequence item, by dotted path."""
    import yaml

    if node is None:
        return
    out.setdefault(prefix, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            dotted = f"{prefix}.{key.value}" if prefix else str(key.value)
            out[dotted] = key.start_mark.line + 1
            _lines(value, dotted, out)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            dotted = f"{prefix}.{index}" if prefix else str(index)
            out[dotted] = item.start_mark.line + 1
            _lines(item, dotted, out)
