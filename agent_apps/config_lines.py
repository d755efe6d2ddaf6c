"""Where a key sits in a config file (a YAML file or a ``pyproject.toml``), for the
line an error message names. Apart from the cascade (:mod:`.config`), which reads the
files for their values: finding a line is only needed once something is wrong."""

from __future__ import annotations

from pathlib import Path

from .host_files import read_host_text

__all__ = ["MAX_CONFIG_BYTES", "line_in_file", "yaml_line"]

#: The largest config file read (``agent-apps.yaml``, ``config.yaml``, ``pyproject.toml``).
MAX_CONFIG_BYTES = 1024 * 1024


def line_in_file(path: str | None, keys: tuple[str, ...]) -> int | None:
    """The line of a key in a YAML config file or a ``pyproject.toml``, if it can be found."""
    if path is None:
        return None
    try:
        text = read_host_text(path, limit=MAX_CONFIG_BYTES, folder=Path(path).parent)
    except (OSError, UnicodeDecodeError):
        return None
    return _toml_line(text, ("tool", "agent-apps", *keys)) if path.endswith(".toml") else yaml_line(text, keys)


def _toml_line(text: str, keys: tuple[str, ...]) -> int | None:
    """The line of a key in TOML text: a ``[table]`` header or a ``key = ...`` line
    (the line of the nearest enclosing key when the key sits in an inline table)."""
    import re

    def parts(dotted: str) -> tuple[str, ...]:
        return tuple(p.strip().strip("\"'") for p in dotted.split("."))

    table: tuple[str, ...] = ()
    best: int | None = None
    for number, line in enumerate(text.splitlines(), 1):
        header = re.match(r"\s*\[\[?([^\]]+)\]", line)
        assignment = re.match(r"\s*([A-Za-z0-9_.\-\"' ]+?)\s*=", line)
        if header:
            table = parts(header.group(1))
            found = table
        elif assignment:
            found = (*table, *parts(assignment.group(1)))
        else:
            continue
        if found == keys:
            return number
        if len(found) > 2 and keys[: len(found)] == found:
            best = number
    return best


def yaml_line(text: str, keys: tuple[str, ...]) -> int | None:
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
