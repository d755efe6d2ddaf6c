"""How deep a YAML text nests, read from the text itself before any YAML library sees it.

A hostile frontmatter nests a hundred thousand levels deep. PyYAML builds documents
recursively, and how it copes with depth is its own choice, which changes between
releases (6.0.4's C scanner stops at 1000 levels with its own message). So the depth
limit is ours: this module measures nesting in one flat pass over the characters, and
the loader refuses a text that nests too deep before PyYAML reads a byte of it.

Flow collections (``[...]``, ``{...}``) are counted by their brackets: each opening
bracket outside a quoted scalar and a comment, where a node may start, is one level.
Block collections are counted by the columns their entries start at: a key or a ``-``
further right than the collection around it opens one more level (``- - - x`` opens
three on one line), and so does a ``- item`` at the column of the ``key:`` whose value
it is. The lines of block scalars (``|``, ``>``) and of plain scalars that go on over
several lines are text, not structure, and are skipped. On well-formed YAML the count
is the depth PyYAML builds (tests/test_loading.py compares them on every skill file of
the repository and on crafted shapes); the event walk in :mod:`.loading` measures the
composed document again, with the same limit and the same words.
"""

from __future__ import annotations

import re

__all__ = ["MAX_YAML_DEPTH", "too_deep"]

#: How deep a YAML file agent-apps reads may nest (skill frontmatter, config files, tools.yaml).
MAX_YAML_DEPTH = 64

#: A mapping key in block context: a plain or quoted scalar, then ``:`` and a space or the end.
_KEY = re.compile(r"""(?:"(?:[^"\\]|\\.)*"|'(?:[^']|'')*'|[^\s#'"\[\]{},&*!|>%@`-][^#]*?|-[^\s#][^#]*?)\s*:(?:\s|$)""")
#: Node properties before a value: an anchor or a tag.
_PROPERTIES = re.compile(r"(?:[&!][^\s]*\s+)*")


def too_deep(text: str, limit: int) -> int | None:
    """The number (from 1) of the first line of ``text`` where nesting passes ``limit``
    levels, or None when it never does."""
    # the columns of the open block collections, innermost last; a block sequence at the
    # column of the key it is the value of (``key:`` then ``- item``) is at column + 0.5
    columns: list[float] = []
    empty_key: int | None = None  # the column of the key the last line ended with, its value to come
    flow = 0  # open flow collections
    quote = ""  # the quote of a quoted scalar that goes on past a line's end
    scalar_above: float | None = None  # the lines of a block scalar are more indented than this
    plain_above: float | None = None  # so are those that go on with a plain scalar
    for number, line in enumerate(text.splitlines(), 1):
        indent = len(line) - len(line.lstrip(" "))
        if scalar_above is not None:
            if not line.strip() or indent > scalar_above:
                continue
            scalar_above = None
        at = 0
        if not quote and not flow:
            stripped = line[indent:]
            if not stripped or stripped[0] in "#%":
                continue
            if plain_above is not None and indent > plain_above:
                continue
            plain_above = None
            dash = line.startswith("- ", indent) or line[indent:] == "-"
            if dash and empty_key == indent:
                columns.append(indent + 0.5)
            while columns and columns[-1] > indent and not (dash and columns[-1] == indent + 0.5):
                columns.pop()
            empty_key = None
            at = indent
            while True:  # the block indicators the line starts with: each one level, when further right
                at += len(_PROPERTIES.match(line, at)[0])  # type: ignore[index]
                if line.startswith(("- ", "? "), at) or line[at:] in ("-", "?"):
                    width = 1
                else:
                    key = _KEY.match(line, at)
                    if key is None:
                        break
                    width = key.end() - at
                    if not line[key.end() :].strip() or line[key.end() :].lstrip().startswith("#"):
                        empty_key = at
                if not columns or columns[-1] < at:
                    columns.append(at)
                at = len(line) - len(line[at + width :].lstrip(" "))
            if len(columns) > limit:
                return number
            if line.startswith(("|", ">"), at):
                scalar_above = columns[-1] if columns else -1
                continue
        node_start = not quote and flow == 0
        plain = False
        i = at
        while i < len(line):
            char = line[i]
            if quote:
                if char == "\\" and quote == '"':
                    i += 1
                elif char == quote:
                    if quote == "'" and line.startswith("''", i):
                        i += 1
                    else:
                        quote = ""
                node_start = False
            elif char == "#" and (i == 0 or line[i - 1] in " \t"):
                break
            elif char in "[{" and (flow or node_start):
                flow += 1
                if len(columns) + flow > limit:
                    return number
                node_start = True
            elif char in "]}" and flow:
                flow -= 1
                node_start = False
            elif char in ",:?" and flow:
                node_start = True
            elif char in "'\"" and node_start:
                quote = char
                node_start = False
            elif char not in " \t&!" and not (char.isalnum() and _in_properties(line, i)):
                plain = plain or (node_start and not flow)
                node_start = False
            i += 1
        if plain and not quote and not flow:
            plain_above = columns[-1] if columns else -1
    return None


def _in_properties(line: str, i: int) -> bool:
    """Whether ``line[i]`` is part of an anchor or a tag (``&a``, ``!!seq``) before a node."""
    start = i
    while start > 0 and not line[start - 1].isspace():
        start -= 1
    return line[start] in "&!"
