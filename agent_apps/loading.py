"""Reading skill files into :class:`~agent_apps.skill.Skill` objects.

Code skills (``NAME.skill.py``) are parsed, never executed, at discovery: the
``frontmatter`` literal is read from the syntax tree, and ``main`` is imported on
first invoke. Each skill directory is a synthetic package, so a skill can import its
neighbours with relative imports (``from .helpers import parse``) without touching
``sys.path``.

Prompt skills (``NAME.skill.md`` and ``NAME/SKILL.md``) are YAML frontmatter plus a
Markdown body.

A skill file is untrusted input: one hostile file must never break discovery or the
process. Files are bounded before they are parsed (:data:`MAX_FILE_BYTES`; YAML
frontmatter is walked as a stream of events first, so nesting and alias expansion are
bounded before any recursive code sees it; nesting is measured on the text itself, before
PyYAML reads it, see :mod:`._yaml_depth`), and every parser failure, down to a
``RecursionError`` or ``MemoryError``, becomes that file's :class:`SkillLoadError`.
"""

from __future__ import annotations

import ast
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._yaml_depth import MAX_YAML_DEPTH, too_deep
from .errors import SkillLoadError
from .frontmatter import skill_from_frontmatter
from .host_files import HostFileRefused, read_host_file
from .skill import FOLDER_FILES, PROMPT_PARAMS, Skill

if TYPE_CHECKING:
    from .parse_cache import ParseCache

__all__ = ["CODE_SUFFIX", "PROMPT_SUFFIX", "load_file", "load_source", "skill_name_for"]

CODE_SUFFIX = ".skill.py"
PROMPT_SUFFIX = ".skill.md"
_PACKAGE = "_agent_apps_skills"

#: The largest skill file read (a frontmatter and a body, or a module).
MAX_FILE_BYTES = 1024 * 1024
#: How deep a frontmatter may nest (mappings and lists).
MAX_FRONTMATTER_DEPTH = MAX_YAML_DEPTH
_TOO_DEEP = f"the YAML frontmatter nests deeper than {MAX_FRONTMATTER_DEPTH} levels"
#: How many values a YAML frontmatter may hold once its aliases are expanded (so an
#: alias bomb, a few lines that expand to millions of values, is refused).
MAX_FRONTMATTER_NODES = 50_000

def skill_name_for(path: Path) -> str | None:
    """The default name of the skill in ``path``, or None if it is not a skill file."""
    name = path.name
    if name.endswith(CODE_SUFFIX):
        return name[: -len(CODE_SUFFIX)]
    if name.endswith(PROMPT_SUFFIX):
        return name[: -len(PROMPT_SUFFIX)]
    if name in FOLDER_FILES:
        return path.parent.name
    return None


def load_file(path: Path, *, origin: str, root: str | None = None, cache: ParseCache | None = None) -> Skill:
    """Read one skill file; raise :class:`SkillLoadError` naming file and line.

    With ``cache`` (discovery's, one per search-path directory), a file unchanged since
    an earlier process parsed it is not parsed again; the skill is built and checked
    from that parse as from a fresh one."""
    default_name = skill_name_for(path)
    if default_name is None:
        raise SkillLoadError("not a skill file (expected *.skill.py, *.skill.md or NAME/SKILL.md)", path=str(path))
    where = str(path)
    code = path.name.endswith(CODE_SUFFIX)
    parsed: Any = cache.get(where) if cache is not None else None
    if parsed is None:
        try:
            # a link may lead anywhere (skill files are code you run), but not to a FIFO,
            # a device, a credentials folder or a file over the size limit
            data = read_host_file(path, limit=MAX_FILE_BYTES, folder=None)
            # a byte-order mark is tolerated; line ends read as in text mode (CRLF, CR: LF)
            text = data.decode("utf-8-sig").replace("\r\n", "\n").replace("\r", "\n")
        except HostFileRefused as exc:
            raise SkillLoadError(f"refused: the file {exc.reason}", path=where) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise SkillLoadError(f"cannot read: {exc}", path=where) from None
        try:
            parsed = _parse_code(text, where) if code else _parse_prompt(text, where)
        except (RecursionError, MemoryError):
            raise SkillLoadError("the file nests too deeply to be read", path=where) from None
        if cache is not None:
            cache.put(where, parsed)
    if code:
        return _code_skill(parsed, where, default_name, origin=origin, root=root, loader=_import_main)
    return _prompt_skill(parsed, where, default_name, origin=origin, root=root)


def load_source(source: str, *, origin: str = "inline") -> Skill:
    """Build a code skill from Python source (for ``inline://`` refs)."""
    import hashlib

    path = f"<inline:{hashlib.sha256(source.encode()).hexdigest()[:16]}>"
    loader = _inline_loader(source, path)
    return _code_skill(_parse_code(source, path), path, "inline", origin=origin, root=None, loader=loader)


# -- code skills ---------------------------------------------------------------------


def _parse_code(text: str, path: str) -> tuple[Any, int, dict[str, int], int | None, bool]:
    """What a code skill's source says: ``(frontmatter, its line, key lines, the line of
    main or None, whether main may be a middleware's)``. Read from the syntax tree: the
    module is not run."""
    try:
        tree = ast.parse(text, filename=path)
    except SyntaxError as exc:
        raise SkillLoadError(f"syntax error: {exc.msg}", path=path, line=exc.lineno) from None
    except (RecursionError, MemoryError, ValueError) as exc:  # 1 + 1 + ... with thousands of terms
        problem = "an expression nests too deeply" if not isinstance(exc, ValueError) else str(exc)
        raise SkillLoadError(f"cannot parse: {problem}", path=path, line=1) from None
    frontmatter_node: ast.expr | None = None
    main_node: ast.stmt | None = None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(_is_name(t, "frontmatter") for t in node.targets):
            frontmatter_node = node.value
        elif isinstance(node, ast.AnnAssign) and _is_name(node.target, "frontmatter"):
            frontmatter_node = node.value
        elif _defines_main(node):
            main_node = node
    if frontmatter_node is None:
        raise SkillLoadError("no 'frontmatter = {...}' at the top level of the module", path=path, line=1)
    line = frontmatter_node.lineno
    try:
        frontmatter = ast.literal_eval(frontmatter_node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        bad = _first_non_literal(frontmatter_node)
        raise SkillLoadError(
            "frontmatter must be a literal (dicts, lists, strings, numbers, True/False/None): "
            f"found {type(bad).__name__} expression {ast.unparse(bad)[:60]!r}",
            path=path,
            line=bad.lineno,
        ) from None
    if _depth(frontmatter) > MAX_FRONTMATTER_DEPTH:
        raise SkillLoadError(f"the frontmatter nests deeper than {MAX_FRONTMATTER_DEPTH} levels", path=path, line=line)
    main_async = isinstance(main_node, (ast.AsyncFunctionDef, ast.Assign, ast.ImportFrom))
    main_line = main_node.lineno if main_node is not None else None
    return frontmatter, line, _key_lines(frontmatter_node), main_line, main_async


def _code_skill(
    parsed: tuple[Any, int, dict[str, int], int | None, bool],
    path: str,
    default_name: str,
    *,
    origin: str,
    root: str | None,
    loader: Callable[[Skill], Callable[..., Any]],
) -> Skill:
    frontmatter, line, key_lines, main_line, main_async = parsed
    skill = skill_from_frontmatter(
        frontmatter,
        default_name=default_name,
        path=path,
        line=line,
        key_lines=key_lines,
        kind="code",
        origin=origin,
        root=root,
    )
    if main_line is None:
        raise SkillLoadError(
            "no main function: define 'async def main(ctx, args)' (or a plain def)",
            path=path,
            line=line,
            skill=skill.name,
        )
    if skill.is_middleware and not main_async:
        raise SkillLoadError(
            "a middleware's main must be 'async def' (it awaits ctx.manager.next())",
            path=path,
            line=main_line,
            skill=skill.name,
        )
    skill._loader = loader
    return skill


def _is_name(node: ast.expr, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _defines_main(node: ast.stmt) -> bool:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return node.name == "main"
    if isinstance(node, ast.Assign):
        return any(_is_name(t, "main") for t in node.targets)
    if isinstance(node, ast.ImportFrom):
        return any((alias.asname or alias.name) == "main" for alias in node.names)
    return False


def _key_lines(node: ast.expr) -> dict[str, int]:
    if not isinstance(node, ast.Dict):
        return {}
    return {k.value: k.lineno for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}


def _first_non_literal(node: ast.expr) -> ast.expr:
    """The first sub-expression that ``ast.literal_eval`` rejects, for its line."""
    children: list[ast.expr] = []
    if isinstance(node, ast.Dict):
        children = [k for k in node.keys if k is not None] + list(node.values)
    elif isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        children = list(node.elts)
    elif isinstance(node, ast.Constant):
        return node
    else:
        return node
    for child in children:
        try:
            ast.literal_eval(child)
        except (ValueError, TypeError, SyntaxError):
            return _first_non_literal(child)
    return node


def _package_for(directory: Path) -> str:
    """A synthetic package for a skill directory, so relative imports work."""
    import hashlib

    digest = hashlib.sha256(str(directory).encode()).hexdigest()[:12]
    if _PACKAGE not in sys.modules:
        root = types.ModuleType(_PACKAGE)
        root.__path__ = []
        sys.modules[_PACKAGE] = root
    name = f"{_PACKAGE}.d{digest}"
    if name not in sys.modules:
        package = types.ModuleType(name)
        package.__path__ = [str(directory)]
        package.__file__ = str(directory / "__init__.py")
        sys.modules[name] = package
    return name


def _import_main(skill: Skill) -> Callable[..., Any]:
    import importlib.util

    assert skill.path is not None
    path = Path(skill.path)
    stem = path.name[: -len(CODE_SUFFIX)].replace("-", "_").replace(".", "_")
    module_name = f"{_package_for(path.parent)}.{stem}_skill"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:  # pragma: no cover - spec_from_file_location on a real file
        raise SkillLoadError("cannot import", path=str(path), skill=skill.name)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:
        sys.modules.pop(module_name, None)
        if not isinstance(exc, Exception):
            raise
        raise SkillLoadError(
            f"importing the skill raised {type(exc).__name__}: {exc}",
            path=str(path),
            line=_line_in(exc, str(path)),
            skill=skill.name,
        ) from exc
    return _main_of(module, skill)


def _inline_loader(text: str, path: str) -> Callable[[Skill], Callable[..., Any]]:
    def load(skill: Skill) -> Callable[..., Any]:
        module = types.ModuleType(f"{_PACKAGE}.inline_{skill.name.replace('-', '_')}")
        try:
            exec(compile(text, path, "exec"), module.__dict__)
        except Exception as exc:
            raise SkillLoadError(
                f"running the inline skill raised {type(exc).__name__}: {exc}",
                path=path,
                line=_line_in(exc, path),
                skill=skill.name,
            ) from exc
        return _main_of(module, skill)

    return load


def _main_of(module: types.ModuleType, skill: Skill) -> Callable[..., Any]:
    main = getattr(module, "main", None)
    if not callable(main):
        raise SkillLoadError("'main' is not callable", path=skill.path or skill.name, skill=skill.name)
    return main


def _line_in(exc: BaseException, path: str) -> int | None:
    import traceback

    line = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename == path:
            line = frame.lineno
    if isinstance(exc, SyntaxError) and exc.filename == path:
        line = exc.lineno
    return line


# -- prompt skills -------------------------------------------------------------------


def _parse_prompt(text: str, path: str) -> tuple[Any, dict[str, int], list[str], Any, str]:
    """What a prompt skill's file says: ``(frontmatter, key lines, warnings, metadata set
    aside, body)``, with other tools' ways of writing frontmatter already read."""
    import yaml

    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise SkillLoadError("missing YAML frontmatter: the file must start with a '---' line", path=path, line=1)
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip() in ("---", "...")), None)
    if end is None:
        raise SkillLoadError("the YAML frontmatter is not closed by a '---' line", path=path, line=1)
    block = "".join(lines[1:end])
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    notes: list[tuple[str, str | None]] = []
    deep = too_deep(block, MAX_FRONTMATTER_DEPTH)  # before PyYAML reads it: the limit and its words are ours
    if deep is not None:
        raise SkillLoadError(_TOO_DEEP, path=path, line=deep + 1)
    try:
        _check_yaml_shape(block, loader, path)
        frontmatter = yaml.load(block, Loader=loader) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        line = mark.line + 2 if mark is not None else 1
        from .agentskills import lenient_yaml

        lenient = lenient_yaml(block, loader)
        if lenient is None:
            raise SkillLoadError(f"bad YAML frontmatter: {problem}", path=path, line=line) from None
        frontmatter, quoted, block = lenient
        notes.append((f"invalid YAML ({problem}): read with the value of {', '.join(quoted)} quoted", quoted[0]))
    key_lines: dict[str, int] = {}
    aside: Any = None
    if isinstance(frontmatter, dict):
        aside = _foreign_frontmatter(frontmatter, notes)
        node = yaml.compose(block, Loader=loader)
        if isinstance(node, yaml.MappingNode):
            key_lines = {k.value: k.start_mark.line + 2 for k, _ in node.value if isinstance(k.value, str)}
    warnings = [f"{path}:{key_lines.get(key, 1) if key else 1}: {message}" for message, key in notes]
    return frontmatter, key_lines, warnings, aside, "".join(lines[end + 1 :]).strip("\n")


def _prompt_skill(
    parsed: tuple[Any, dict[str, int], list[str], Any, str],
    path: str,
    default_name: str,
    *,
    origin: str,
    root: str | None,
) -> Skill:
    frontmatter, key_lines, warnings, aside, body = parsed
    skill = skill_from_frontmatter(
        frontmatter,
        default_name=default_name,
        path=path,
        line=1,
        key_lines=key_lines,
        kind="prompt",
        origin=origin,
        root=root,
        lenient_keys=True,
        body=body,
        warnings=warnings,
    )
    if aside:  # kept for describe, never read
        skill.extra["metadata"] = aside
    if skill.params is None and not skill.is_middleware:  # a middleware's params are its activation's
        skill.params = PROMPT_PARAMS
    return skill


def _foreign_frontmatter(frontmatter: dict[str, Any], notes: list[tuple[str, str | None]]) -> Any:
    """Read what other agent tools write in their own way (see :mod:`.agentskills`):
    Claude-style ``allowed-tools`` (a string or a list), ``metadata`` values that mean
    something else there, an empty or non-string description. Returns the metadata set
    aside; ``notes`` receives ``(message, key)`` for each thing read differently."""
    from .agentskills import foreign_metadata, translate_allowed_tools

    description = frontmatter.get("description")
    if description is None:
        frontmatter.pop("description", None)
    elif not isinstance(description, str):
        frontmatter["description"] = str(description)
    tools = frontmatter.get("allowed-tools")
    if isinstance(tools, list) and all(isinstance(t, str) for t in tools):
        tools = " ".join(tools)  # other tools' SKILL.md allow a list
    if tools is not None:
        if isinstance(tools, str):
            tools, tool_notes = translate_allowed_tools(tools)
            notes += [(note, "allowed-tools") for note in tool_notes]
        else:
            notes.append(("allowed-tools must be a string or a list of strings; the skill may call no tools", None))
            tools = ""
        frontmatter["allowed-tools"] = tools
    metadata = frontmatter.get("metadata")
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        notes.append((f"metadata must be a mapping, not {type(metadata).__name__}; ignored", "metadata"))
        del frontmatter["metadata"]
        return metadata
    kept, aside, metadata_notes = foreign_metadata(metadata)
    frontmatter["metadata"] = kept
    notes += [(message, "metadata") for message, _ in metadata_notes]
    return aside


def _check_yaml_shape(block: str, loader: Any, path: str) -> None:
    """Refuse YAML that nests too deep or expands too far, before it is composed.

    PyYAML composes and constructs recursively (in C for the C loader, where running
    out of stack kills the process), and it shares aliased values, which later turn into
    copies (``list --json`` would print every one). The event stream is flat, so it is
    walked first: depth and the size of the document with every alias expanded.
    """
    import yaml

    depth = 0
    nodes = 0
    sizes: dict[str, int] = {}  # anchor -> nodes in its value, aliases expanded
    open_: list[tuple[str | None, int]] = []
    for event in yaml.parse(block, Loader=loader):
        if isinstance(event, yaml.AliasEvent):
            nodes += sizes.get(event.anchor or "", 1)
        elif isinstance(event, yaml.ScalarEvent):
            nodes += 1
            if event.anchor:
                sizes[event.anchor] = 1
        elif isinstance(event, yaml.CollectionStartEvent):
            nodes += 1
            depth += 1
            open_.append((event.anchor, nodes))
            if depth > MAX_FRONTMATTER_DEPTH:
                raise SkillLoadError(_TOO_DEEP, path=path, line=_line_of(event))
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
            anchor, start = open_.pop()
            if anchor:
                sizes[anchor] = nodes - start + 1
        if nodes > MAX_FRONTMATTER_NODES:
            raise SkillLoadError(
                f"the YAML frontmatter holds more than {MAX_FRONTMATTER_NODES} values once its aliases "
                "are expanded (an alias bomb?)",
                path=path,
                line=_line_of(event),
            )


def _line_of(event: Any) -> int:
    """The file line of a YAML event (the frontmatter starts on line 2)."""
    mark = event.start_mark
    return mark.line + 2 if mark is not None else 1


def _depth(value: Any, level: int = 0) -> int:
    """How deep ``value`` nests (stops counting past the limit)."""
    if level > MAX_FRONTMATTER_DEPTH or not isinstance(value, (dict, list, tuple, set)):
        return level
    items = value.values() if isinstance(value, dict) else value
    return max((_depth(item, level + 1) for item in items), default=level + 1)
