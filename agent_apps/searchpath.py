"""The search path: where skills are found, in order, first match wins.

1. explicit directories (``--path``, ``ContextManager(search_path=...)``, then
   ``AGENT_APPS_PATH``);
2. the project's ``./skills``;
3. the user's ``~/.agent-apps/skills``;
4. directories contributed by installed packages (entry-point group
   ``agent_apps.skills``, hook ``agent_apps_skill_dirs``);
5. the bundled ``skills/`` and ``extensions/``.

A later skill with the same name is *shadowed*: it stays in :attr:`Catalog.entries`
(``agent-apps list --all`` shows it) but never runs.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .errors import SkillLoadError
from .loading import CODE_SUFFIX, PROMPT_SUFFIX, load_file
from .parse_cache import ParseCache
from .skill import FOLDER_FILES, Skill

__all__ = ["Catalog", "Root", "bundled_roots", "scan"]

_SKIP_DIRS = {"__pycache__", "node_modules", "venv", "site-packages"}


@dataclass(frozen=True)
class Root:
    """One directory of the search path and what put it there."""

    path: Path
    origin: str


@dataclass
class Entry:
    """A skill found on the search path, and the winner that shadows it, if any."""

    skill: Skill
    shadowed_by: Skill | None = None


@dataclass
class Catalog:
    """Every skill on the search path: the winners by name, all entries, the errors."""

    roots: list[Root]
    skills: dict[str, Skill] = field(default_factory=dict)
    entries: list[Entry] = field(default_factory=list)
    errors: list[SkillLoadError] = field(default_factory=list)

    @classmethod
    def build(cls, sources: Iterable[Root | Iterable[Skill]]) -> Catalog:
        """Scan ``sources`` in order: search-path roots, or skills contributed as such."""
        catalog = cls(roots=[])
        for source in sources:
            if isinstance(source, Root):
                catalog.roots.append(source)
                items: Iterable[Skill | SkillLoadError] = scan(source)
            else:
                items = source
            for item in items:
                if isinstance(item, SkillLoadError):
                    catalog.errors.append(item)
                else:
                    catalog.add(item)
        return catalog

    @property
    def warnings(self) -> list[str]:
        """The warnings of every skill found (winners and shadowed), each naming a file."""
        return [warning for entry in self.entries for warning in entry.skill.warnings]

    def add(self, skill: Skill) -> None:
        """Add a skill; if the name is taken it is recorded as shadowed.

        A tool of a mounted MCP server never takes a name from a skill file (a server
        ``file`` with a tool ``read`` must not replace the bundled ``file-read``); a
        name a mounted tool cannot have is a warning on that tool.
        """
        winner = self.skills.get(skill.name)
        if winner is not None and winner.mounted and not skill.mounted:
            self.skills[skill.name] = skill  # the file wins the name back
            for entry in self.entries:
                if entry.skill is winner:
                    entry.shadowed_by = skill
            _not_mounted(winner, skill)
            winner = None
        elif winner is not None and skill.mounted:
            _not_mounted(skill, winner)
        if winner is None:
            self.skills[skill.name] = skill
        elif winner.root is not None and winner.root == skill.root and skill.path:
            # the same directory tree: almost certainly a mistake, so say so
            self.errors.append(
                SkillLoadError(f"a skill named {skill.name!r} already exists here: {winner.where()} wins",
                               path=skill.path, line=skill.line, skill=skill.name)
            )
        self.entries.append(Entry(skill, winner))


    def remove(self, skill: Skill) -> None:
        """Forget a skill added by :meth:`add` (a registered skill being replaced)."""
        self.entries = [entry for entry in self.entries if entry.skill is not skill]
        if self.skills.get(skill.name) is skill:
            del self.skills[skill.name]


def _not_mounted(tool: Skill, winner: Skill) -> None:
    mcp = tool.metadata.get("mcp") or {}
    tool.warnings.append(
        f"{mcp.get('config', 'config')}: MCP server {mcp.get('server')!r}: tool {mcp.get('tool')!r} is not "
        f"mounted as {tool.name!r}, which {winner.where()} has (give the server another name in mcp_servers)"
    )


def scan(root: Root) -> Iterator[Skill | SkillLoadError]:
    """Every skill file under ``root``, in a stable (sorted, depth-first) order.

    Files unchanged since an earlier scan are not parsed again (:mod:`.parse_cache`)."""
    if not root.path.is_dir():
        return
    cache = ParseCache(root.path)
    for path in _skill_files(root.path):
        try:
            yield load_file(path, origin=root.origin, root=str(root.path), cache=cache)
        except SkillLoadError as exc:
            yield exc
        except Exception as exc:  # a parser bug must not cost the other skills: this file's error
            yield SkillLoadError(f"cannot load: {type(exc).__name__}: {exc}", path=str(path))
    cache.save()


def _skill_files(directory: Path) -> Iterator[Path]:
    try:
        with os.scandir(directory) as it:
            items = sorted(it, key=lambda e: e.name)
    except OSError:
        return
    subdirs = []
    folder_file = next((item.name for f in FOLDER_FILES for item in items if item.name == f), None)
    for item in items:
        name = item.name
        if item.is_dir():
            if not name.startswith(".") and name not in _SKIP_DIRS:
                subdirs.append(item)
        elif name.endswith((CODE_SUFFIX, PROMPT_SUFFIX)) or name == folder_file:
            yield Path(item.path)  # SKILL.md, else a lowercase skill.md, never both
    for sub in subdirs:
        yield from _skill_files(Path(sub.path))


def bundled_roots() -> list[Root]:
    """The bundled ``skills/`` and ``extensions/``, from a wheel or a checkout."""
    package = Path(__file__).resolve().parent
    base = package / "_bundled"  # where the wheel puts them
    if not base.is_dir():
        base = package.parent  # a checkout or an editable install
    return [Root(base / "skills", "bundled"), Root(base / "extensions", "bundled")]
