"""Markdown as compact plain text, for what the model reads (workspace files, memory
chunks): the syntax costs tokens and says nothing the model needs."""

from __future__ import annotations

import re

__all__ = ["strip_markdown"]

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_RULE = re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$")
_QUOTE = re.compile(r"^\s{0,3}>\s?")
_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_EMPHASIS = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1|(?<![\w*])([*_])(?=\S)(.+?)(?<=\S)\3(?![\w*])")
_CODE = re.compile(r"`([^`]+)`")
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_TAG = re.compile(r"</?[A-Za-z][^>]*>")


def strip_markdown(text: str) -> str:
    """Markdown as compact plain text: headings, emphasis, code marks, links (their
    text, with the address when it differs), images, HTML tags and comments, rules and
    quote marks go; list markers, numbers and line structure stay. Blank-line runs
    become one blank line."""
    text = _COMMENT.sub("", text.replace("\r\n", "\n"))
    lines: list[str] = []
    fenced = False
    for line in text.split("\n"):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            lines.append(line.rstrip())
            continue
        if _RULE.match(line):
            lines.append("")
            continue
        heading = _HEADING.match(line)
        if heading:
            line = heading[1] + ":" if heading[1] and heading[1][-1].isalnum() else heading[1]
        line = _QUOTE.sub("", line)
        line = _IMAGE.sub(lambda m: m[1], line)
        line = _LINK.sub(lambda m: m[1] if m[1] == m[2] else f"{m[1]} ({m[2]})", line)
        line = _CODE.sub(lambda m: m[1], line)
        line = _EMPHASIS.sub(lambda m: m[2] or m[4], line)
        line = _TAG.sub("", line)
        lines.append(line.rstrip())
    out = re.sub(r"\n{3,}", "\n\n", "\n".join(lines))
    return out.strip()
