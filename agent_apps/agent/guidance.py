"""Guidance skills loaded on demand: what ``load-skills`` returns, and what an agent
remembers of the guidance it loaded.

A guidance skill (:attr:`Skill.guidance <agent_apps.skill.Skill.guidance>`) is listed
in the system prompt by name and description only. Its body enters the agent's
context when the model asks for it (``load-skills``), as a tool result; from then on:

* the skill's folder is readable by that agent's code, as its own skill's folder is
  (``file-read``, ``file-list``; read only; see :func:`agent_apps.tools.readable_folders`);
* the agent remembers it: a session keeps the names (``loaded_skills`` in the session's
  metadata), and later runs of the session get the bodies in a dynamic layer of their
  system prompt (so compaction cannot lose them) and the folders readable again.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..context import agent_scope
from .prompt import cap

if TYPE_CHECKING:
    from ..context import Context
    from ..skill import Skill

__all__ = ["MAX_FILES", "folder_files", "loaded_section", "note_loaded", "remember", "render"]

#: Files listed per folder at most.
MAX_FILES = 200
_SKIPPED = {".git", "__pycache__", ".venv", "node_modules", ".DS_Store"}


def folder_files(folder: str) -> list[str]:
    """The files of a skill's folder, relative and sorted (symlinked folders are not
    followed; caches and version control are left out), at most :data:`MAX_FILES`."""
    out: list[str] = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in _SKIPPED)
        for name in sorted(files):
            if name not in _SKIPPED:
                out.append(os.path.relpath(os.path.join(root, name), folder))
                if len(out) > MAX_FILES:
                    return out[:MAX_FILES] + [f"... (more than {MAX_FILES} files)"]
    return out


def render(skill: Skill) -> str:
    """One loaded skill as the model reads it: name, folder and files, then the body."""
    head = f"# Guidance: {skill.name}\n"
    folder = skill.folder
    if folder:
        head += (
            f"\nFolder: {folder} (read its files with file-read and file-list using absolute paths; "
            "paths in the text below are relative to it)\n"
            f"Files: {', '.join(folder_files(folder)) or '(none)'}\n"
        )
    return f"{head}\n{cap((skill.body or '').strip())}\n"


def loaded_section(skills: Sequence[Skill]) -> str:
    """The dynamic layer of guidance loaded earlier in the session."""
    if not skills:
        return ""
    intro = "## Guidance you loaded earlier\n\nYou loaded these earlier in this conversation; they still apply.\n\n"
    return intro + "\n".join(render(s) for s in skills)


async def remember(ctx: Context, skills: Iterable[Skill]) -> None:
    """Note skills that agent code loaded: their folders become readable by that
    agent's code; a session whose content is kept remembers their names (not one
    seen off the record)."""
    scope = agent_scope(ctx)
    if scope is None:
        return
    skills = list(skills)
    note_loaded(scope, skills)
    session = ctx.run.session_id
    if skills and session is not None and scope.get("retention") == "permanent" and not scope.get("read_only"):
        # each name it loads, again or not: a reset since the run loaded it is not undone
        store = ctx.manager.context_manager.state
        await store.call(store.sessions.add_loaded_guidance, session, [s.name for s in skills])


def note_loaded(scope: dict[str, Any], skills: Iterable[Skill]) -> None:
    """Add ``skills`` to an agent's loaded skills and readable folders (its scope). A
    resumed durable run calls it for the load-skills calls its journal answers, so the
    folders open again."""
    loaded: list[str] = scope.setdefault("loaded_skills", [])
    folders: list[str] = scope.setdefault("loaded_folders", [])
    new = [s for s in skills if s.name not in loaded]
    loaded += [s.name for s in new]
    folders += [s.folder for s in new if s.folder and s.folder not in folders]
