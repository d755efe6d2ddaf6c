"""``agent-apps list``, ``describe`` and ``config``: what is on the search path, and how
it is configured (imported only for them)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

from ..errors import AgentAppsError
from ..terminal import printable
from . import EXIT_FAILED, EXIT_OK, _count, _manager, _Parser, _skill, _table

if TYPE_CHECKING:
    from . import _Subparsers


def cmd_list(args: argparse.Namespace) -> int:
    """Exit status 1 when a skill file, a package, an MCP server or the config failed to
    load: the listing is then incomplete, and scripts and CI should notice. With
    ``--strict``, warnings about skill files count as failures too."""
    cm = _manager(args)
    catalog = cm.catalog
    errors: list[Exception] = list(cm.errors)
    try:
        cm.config_for(None)
    except AgentAppsError as exc:
        errors.append(exc)
    listed = [entry for entry in catalog.entries if _matches(entry.skill, args.pattern)]
    if args.json:
        entries = [
            {
                **entry.skill.describe(),
                "hidden": entry.skill.hidden,
                "shadowed_by": entry.shadowed_by.where() if entry.shadowed_by else None,
            }
            for entry in listed
            if args.all or (entry.shadowed_by is None)
        ]
        json.dump(
            {"skills": entries, "errors": [str(e) for e in errors], "warnings": catalog.warnings},
            sys.stdout,
            indent=2,
        )
        print()
    else:
        rows: list[tuple[str, ...]] = []
        shown = _paths_as_typed(str(cm.cwd))
        for entry in sorted(listed, key=lambda e: e.skill.name):
            skill = entry.skill
            if not args.all and (entry.shadowed_by is not None or skill.hidden):
                continue
            if args.quiet:  # names only: for scripts, and the shell's completion
                rows.append((skill.name,))
            elif args.all or args.verbose:
                note = f"shadowed by {shown(entry.shadowed_by.where())}" if entry.shadowed_by else ""
                note += " hidden" if skill.hidden else ""
                rows.append((skill.name, skill.origin, shown(skill.where()), note.strip()))
            else:
                rows.append((skill.name, _first_line(skill.description)))
        _table(rows, sys.stdout)
        if args.pattern and not rows and not args.quiet:
            print(f"no skill matches {args.pattern!r}", file=sys.stderr)
    if errors:
        print(f"\n{_count(len(errors), 'file')} could not be loaded:", file=sys.stderr)
        for error in errors:
            print(f"  {printable(str(error))}", file=sys.stderr)
    warnings = catalog.warnings
    if warnings and args.strict:
        print(f"\n{_count(len(warnings), 'warning')}, errors with --strict:", file=sys.stderr)
        for warning in warnings:
            print(f"  {printable(str(warning))}", file=sys.stderr)
    elif warnings:
        print(
            f"\n{_count(len(warnings), 'warning')} about skill files: 'agent-apps list --strict' shows them",
            file=sys.stderr,
        )
    return EXIT_FAILED if errors or (args.strict and warnings) else EXIT_OK


def cmd_describe(args: argparse.Namespace) -> int:
    from ..validation import check_schemas

    cm = _manager(args)
    skill = _skill(cm, args.name)
    check_schemas(skill)
    if args.stub:  # what the model reads: the typed Python stub
        from ..stubs import skill_stub

        print(printable(skill_stub(skill)))
        return EXIT_OK
    if args.json:
        json.dump(skill.describe(), sys.stdout, indent=2)
        print()
        return EXIT_OK
    out = _Printable(sys.stdout)  # a skill file's text is shown, never obeyed
    print(f"{skill.name}: {skill.description}" if skill.description else skill.name, file=out)
    print(f"  kind: {skill.kind}, origin: {skill.origin} ({_paths_as_typed(str(cm.cwd))(skill.where())})", file=out)
    props = (skill.params or {}).get("properties", {})
    required = set((skill.params or {}).get("required", ()))
    if props:
        print("  args:", file=out)
        for key, schema in props.items():
            facts = [str(schema.get("type", "any"))]
            if key in required:
                facts.append("required")
            if "default" in schema:
                facts.append(f"default {json.dumps(schema['default'])}")
            if "enum" in schema:
                facts.append("one of " + ", ".join(json.dumps(v) for v in schema["enum"]))
            desc = f": {schema['description']}" if schema.get("description") else ""
            print(f"    {key} ({', '.join(facts)}){desc}", file=out)
    elif skill.params is None:
        print("  args: none", file=out)
    if skill.returns is not None:
        print(f"  returns: {json.dumps(skill.returns)}", file=out)
    if skill.allowed_tools is not None:
        print(f"  allowed-tools: {skill.allowed_tools}", file=out)
    if skill.middleware:
        print(f"  middleware: {' '.join(skill.middleware)}", file=out)
    if skill.hidden:
        print("  hidden: yes", file=out)
    if skill.guidance:
        print("  guidance: yes (agents load it with load-skills)", file=out)
    for key in ("license", "compatibility"):
        if skill.extra.get(key) is not None:
            print(f"  {key}: {skill.extra[key]}", file=out)
    for warning in skill.warnings:
        print(f"  warning: {warning}", file=out)
    if skill.body:
        print("\n" + skill.body, file=out)
    return EXIT_OK


def cmd_config(args: argparse.Namespace) -> int:
    cm = _manager(args)
    resolved = cm.config_for(_skill(cm, args.name)) if args.name else cm.cascade.resolve(None)
    if args.json:
        json.dump({"values": resolved.values, "sources": resolved.sources}, sys.stdout, indent=2)
        print()
        return EXIT_OK
    _table(_config_rows(resolved, cm.config_keys() or {}, _paths_as_typed(str(cm.cwd))), sys.stdout)
    return EXIT_OK


def _paths_as_typed(cwd: str) -> Callable[[str], str]:
    """Shortens the absolute paths in a text as the user would type them: relative to
    ``cwd`` under it, else from ``~`` under the home folder (``--json`` keeps them whole)."""
    bases = [(base.rstrip("/") + "/", short) for base, short in ((cwd, ""), (os.path.expanduser("~"), "~/"))]
    bases = [(base, short) for base, short in bases if base != "/"]

    def shown(text: str) -> str:
        for base, short in bases:
            text = text.replace(base, short)
        return text

    return shown


def _config_rows(
    resolved: Any, keys: dict[tuple[str, ...], str], shown: Callable[[str], str]
) -> list[tuple[str, ...]]:
    """One row per config value, cut to ``_VALUE_WIDTH`` characters (``--json`` has it all).

    Only sections the key table breaks down (``model``, ``model.sandbox``, ...) are
    shown key by key: a skill's ``returns`` schema or ``model.params`` is one row, with
    the layers that set any part of it.
    """
    from ..config import MAPPING, expected_type

    rows: dict[str, list[str]] = {}
    for dotted, source in sorted(resolved.sources.items()):
        parts = tuple(dotted.split("."))
        cut = next((i for i in range(1, len(parts)) if expected_type(keys, parts[:i]) != MAPPING), len(parts))
        sources = rows.setdefault(".".join(parts[:cut]), [])
        if source not in sources:
            sources.append(source)
    return [(key, _cut(json.dumps(_dotted(resolved.values, key))), shown(" + ".join(src))) for key, src in rows.items()]


_VALUE_WIDTH = 60


def _cut(text: str) -> str:
    return text if len(text) <= _VALUE_WIDTH else text[: _VALUE_WIDTH - 1] + "…"


def _dotted(values: dict[str, Any], key: str) -> Any:
    for part in key.split("."):
        values = values[part]
    return values


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= 80 else line[:77] + "..."


class _Printable:
    """A text stream that escapes what it is written (see :mod:`agent_apps.terminal`)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        return self.stream.write(printable(text))

    def flush(self) -> None:
        self.stream.flush()


def _matches(skill: Any, pattern: str | None) -> bool:
    """``list PATTERN``: a glob over names (``file-*``); without glob characters, words
    found in the name or the description, in any case (``list notes``)."""
    if pattern is None:
        return True
    if any(c in pattern for c in "*?["):
        from fnmatch import fnmatchcase

        return fnmatchcase(skill.name, pattern)
    return pattern.lower() in skill.name or pattern.lower() in (skill.description or "").lower()


def _list_parser(sub: _Subparsers, common: _Parser) -> None:
    p = sub.add_parser(
        "list", parents=[common], help="list the skills on the search path",
        description="List the skills on the search path, with the first line of each description; "
        "PATTERN keeps those whose name matches it (a glob: 'file-*') or, without glob characters, "
        "whose name or description holds it.",
    )
    p.add_argument("pattern", metavar="PATTERN", nargs="?", help="a glob over names, or words to look for")
    p.add_argument("--all", action="store_true", help="also hidden and shadowed skills, with origins")
    shown = p.add_mutually_exclusive_group()
    shown.add_argument("-q", "--quiet", action="store_true", help="names only, one a line")
    shown.add_argument("-v", "--verbose", action="store_true", help="with each skill's origin and file")
    p.add_argument("--json", action="store_true", help="JSON output")
    p.add_argument(
        "--strict", action="store_true", help="warnings (e.g. the Agent Skills rules) are errors: exit 1"
    )
    p.set_defaults(run=cmd_list)


def _describe_parser(sub: _Subparsers, common: _Parser) -> None:
    p = sub.add_parser("describe", parents=[common], help="show a skill's description, args and result")
    p.add_argument("name", metavar="NAME", help="a skill name, or a path to a skill file")
    p.add_argument("--json", action="store_true", help="JSON output")
    p.add_argument("--stub", action="store_true", help="the typed Python stub the model is shown")
    p.set_defaults(run=cmd_describe)


def _config_parser(sub: _Subparsers, common: _Parser) -> None:
    p = sub.add_parser(
        "config", parents=[common], help="show the resolved config cascade and where each value came from"
    )
    p.add_argument("name", metavar="NAME", nargs="?", help="the skill whose cascade to show (a name or a path)")
    p.add_argument("--json", action="store_true", help="JSON output")
    p.set_defaults(run=cmd_config)
