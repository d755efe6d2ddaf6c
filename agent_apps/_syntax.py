"""The one small syntax shared by allowed-tools specs and middleware refs.

``name``, ``name(key=value, other="a, b")``: a head, then ``key=value`` pairs in
parentheses; values may be quoted to hold commas or parentheses. Lists of such items
are separated by whitespace outside parentheses.
"""

from __future__ import annotations

__all__ = ["parse_call", "split_top_level"]


def split_top_level(text: str, separators: str) -> list[str]:
    """Split on ``separators`` outside parentheses and quotes; drop empty parts."""
    parts, current, depth, quote = [], "", 0, ""
    for char in text:
        if quote:
            if char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char in separators and depth == 0:
            if current.strip():
                parts.append(current.strip())
            current = ""
            continue
        current += char
    if current.strip():
        parts.append(current.strip())
    return parts


def parse_call(token: str) -> tuple[str, list[tuple[str, str]]]:
    """``"audit(level=info)"`` -> ``("audit", [("level", "info")])``; ValueError if malformed."""
    if "(" not in token:
        return token.strip(), []
    if not token.endswith(")"):
        raise ValueError(f"{token!r}: missing ')'")
    head, _, inner = token[:-1].partition("(")
    pairs = []
    for part in split_top_level(inner, ","):
        key, eq, value = part.partition("=")
        if not eq or not key.strip():
            raise ValueError(f"{token!r}: {part!r} is not key=value")
        pairs.append((key.strip(), _unquote(value.strip())))
    return head.strip(), pairs


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value
