"""Python code as highlighted, escaped HTML, with the standard library's tokenizer.

Agent code is Python (with top-level ``await``, which tokenizing does not mind), so
:mod:`tokenize` splits it exactly as Python does, with no dependency. Each token gets a
class (``kw`` keyword, ``bi`` builtin, ``st`` string, ``nu`` number, ``co`` comment,
``fn`` a name being defined, ``de`` a decorator; operators and other names stay plain,
which keeps a long run's page small); the text between
tokens is kept as it was, so the code reads character for character as written. Code
that does not tokenize (cut short, say) is shown plain.
"""

from __future__ import annotations

import builtins
import io
import keyword
import tokenize

from .html import Html, esc, tag

__all__ = ["highlight"]

_BUILTINS = frozenset(name for name in dir(builtins) if not name.startswith("_")) | {"ctx", "memory"}
_STRING_TYPES = {tokenize.STRING} | {
    getattr(tokenize, name) for name in ("FSTRING_START", "FSTRING_MIDDLE", "FSTRING_END") if hasattr(tokenize, name)
}
_SKIP = {tokenize.ENCODING, tokenize.ENDMARKER, tokenize.NEWLINE, tokenize.NL, tokenize.INDENT, tokenize.DEDENT}


def highlight(code: str) -> Html:
    """``code`` as HTML: escaped, its tokens wrapped in ``<span class=...>``."""
    lines = code.splitlines(keepends=True)
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, SyntaxError):
        return esc(code)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))

    def at(row: int, col: int) -> int:
        return offsets[row - 1] + col if row - 1 < len(offsets) else len(code)

    out: list[str] = []
    done = 0
    before = ""
    for token in tokens:
        if token.type in _SKIP:
            continue
        start, end = at(*token.start), at(*token.end)
        if start < done:  # never emit a character twice
            continue
        out.append(esc(code[done:start]))
        kind = _kind(token, before)
        text = code[start:end]
        out.append(tag('<span class="{}">{}</span>', kind, text) if kind else esc(text))
        done = end
        before = "@" if kind == "de" else token.string if token.type == tokenize.NAME else ""
    out.append(esc(code[done:]))
    return Html("".join(out))


def _kind(token: tokenize.TokenInfo, before: str) -> str | None:
    kind = token.type
    if kind in _STRING_TYPES:
        return "st"
    if kind == tokenize.NUMBER:
        return "nu"
    if kind == tokenize.COMMENT:
        return "co"
    if kind == tokenize.OP:
        first = not token.line[: token.start[1]].strip()
        return "de" if token.string == "@" and first else None  # else: matrix product
    if kind == tokenize.NAME:
        if before in ("def", "class"):
            return "fn"
        if before == "@":
            return "de"
        if keyword.iskeyword(token.string) or keyword.issoftkeyword(token.string):
            return "kw"
        if token.string in _BUILTINS:
            return "bi"
    return None
