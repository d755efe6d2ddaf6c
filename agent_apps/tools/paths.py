"""Path boundaries for the file tools: allowed roots, denied paths, denied wins.

Every path is made absolute (relative paths are relative to the workspace, ``~`` is
the user's home) and resolved with symlinks followed *before* it is checked, so a link
inside the workspace that points at ``~/.ssh`` is judged by where it points. Config
entries are resolved the same way, so ``/tmp`` being a link (macOS) does not matter.

What this does not stop: a path swapped for a symlink between the check and the open
(we open the resolved path, and with ``O_NOFOLLOW`` on its last component, which
narrows but does not close that window), and anything done through the ``shell`` tool,
which runs commands as the user and is not confined to these paths.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..host_files import BUILTIN_DENIED, covers
from .errors import PermissionDenied

__all__ = ["BUILTIN_DENIED", "PROTECTED_NAMES", "PathPolicy", "scratch_dir"]

#: File names the file tools never write: config that could widen the agent's own
#: permissions (``security.*`` lives there, and CLI tools are declared there).
PROTECTED_NAMES: frozenset[str] = frozenset({"agent-apps.yaml", "tools.yaml"})

_GLOB_CHARS = frozenset("*?[")


def scratch_dir() -> Path:
    """``<tmp>/agent-apps``: the scratch directory allowed by default."""
    return Path(tempfile.gettempdir()) / "agent-apps"


@dataclass(frozen=True)
class PathPolicy:
    """The resolved boundaries for one invocation."""

    workspace: Path
    allowed: tuple[str, ...]
    denied: tuple[str, ...]
    #: Folders readable (never writable) beyond ``allowed``: the running skill's own
    #: folder. The built-in denial of the agent-apps home yields for a folder inside it
    #: (a skill under ~/.agent-apps/skills); every other denied path still holds.
    readable: tuple[str, ...] = ()
    #: The denied entry that ``readable`` folders inside it override: the agent-apps home.
    home: str | None = None

    @classmethod
    def from_security(
        cls, security: Mapping[str, Any], *, cwd: Path, agent_home: Path, readable: tuple[str, ...] = ()
    ) -> PathPolicy:
        """Build the policy from a resolved ``security`` mapping (see settings)."""
        workspace = Path(_resolve(str(security.get("workspace") or cwd), cwd))
        allowed_cfg = _paths(security.get("allowed_paths"))
        allowed = allowed_cfg if allowed_cfg is not None else [str(workspace), str(scratch_dir())]
        denied = _paths(security.get("denied_paths")) or []
        if security.get("builtin_denied_paths", True):
            denied += [*BUILTIN_DENIED, str(agent_home)]
        return cls(
            workspace=workspace,
            allowed=tuple(_entry(e, workspace) for e in allowed),
            denied=tuple(_entry(e, workspace) for e in denied),
            readable=tuple(_resolve(r, workspace) for r in readable),
            home=_resolve(str(agent_home), workspace),
        )

    def resolve(self, path: str) -> str:
        """``path`` made absolute with symlinks followed (no check)."""
        return _resolve(path, self.workspace)

    def denied_rule(self, resolved: str, *, within: str | None = None) -> str | None:
        """The denied entry that covers ``resolved``, if any. ``within``: a readable
        folder holding ``resolved``, for which the agent-apps home is not denied."""
        for entry in self.denied:
            if covers(entry, resolved) and not (within and entry == self.home and _inside(within, entry)):
                return entry
        return None

    def denied_for_files_of(self, folder: str | os.PathLike[str]) -> tuple[str, ...]:
        """The denied entries that hold for the files of ``folder`` the host reads for an
        agent (its workspace): the agent-apps home yields to a folder inside it, as for
        readable folders."""
        real = self.resolve(str(folder))
        return tuple(entry for entry in self.denied if not (entry == self.home and _inside(real, entry)))

    def _readable_root(self, resolved: str, write: bool) -> str | None:
        if write:
            return None
        return next((root for root in self.readable if covers(root, resolved)), None)

    def check(self, skill: str, path: str, *, write: bool = False) -> Path:
        """The resolved path, or :class:`PermissionDenied` saying which rule refused it."""
        if not isinstance(path, str) or not path or "\x00" in path:
            raise PermissionDenied(skill, f"invalid path {path!r}", resource=str(path))
        lexical = os.path.abspath(os.path.join(self.workspace, os.path.expanduser(path)))
        resolved = self.resolve(path)
        shown = path if resolved == lexical else f"{path} (resolves to {resolved})"
        own = self._readable_root(resolved, write)
        for candidate in (resolved, lexical):
            rule = self.denied_rule(candidate, within=own)
            if rule is not None:
                raise PermissionDenied(
                    skill, f"{shown} is inside denied path {rule}", rule="security.denied_paths", resource=resolved
                )
        if own is None and not any(covers(entry, resolved) for entry in self.allowed):
            roots = ", ".join(self.allowed) or "(none)"
            raise PermissionDenied(
                skill,
                f"{shown} is outside the allowed paths: {roots}",
                rule="security.allowed_paths",
                resource=resolved,
            )
        if write and not PROTECTED_NAMES.isdisjoint(_names_along(lexical) | {os.path.basename(resolved)}):
            raise PermissionDenied(
                skill,
                f"{shown} is agent-apps configuration; the file tools never write it",
                rule="built-in protected config names",
                resource=resolved,
            )
        return Path(resolved)

    def visible(self, resolved: str) -> bool:
        """Whether a directory listing may show ``resolved`` (not denied, inside allowed)."""
        real = self.resolve(resolved)
        own = self._readable_root(real, False)
        return self.denied_rule(real, within=own) is None and (
            own is not None or any(covers(e, real) for e in self.allowed)
        )


def _names_along(path: str) -> set[str]:
    """The file name of ``path`` as given and of every link its last component leads
    through: ``notes.txt -> agent-apps.yaml -> real.yaml`` has all three names, so a
    protected name is found whether it is the link, the target or in between. The whole
    chain is followed, however long (the tools open the resolved path, so no kernel
    limit on links stops a longer one), until it ends or comes back to a link seen."""
    names = {os.path.basename(path)}
    current, seen = path, set()
    while current not in seen:
        seen.add(current)
        try:
            target = os.readlink(current)
        except OSError:
            break
        current = os.path.normpath(os.path.join(os.path.dirname(current), target))
        names.add(os.path.basename(current))
    return names


def _resolve(path: str, base: Path | str) -> str:
    return os.path.realpath(os.path.join(base, os.path.expanduser(path)))


def _entry(entry: object, workspace: Path) -> str:
    text = str(entry)
    if _GLOB_CHARS & set(text):
        return (
            os.path.join(workspace, os.path.expanduser(text))
            if not text.startswith(("/", "~", "*"))
            else os.path.expanduser(text)
        )
    return _resolve(text, workspace)


def _inside(folder: str, entry: str) -> bool:
    """``folder`` lies strictly inside ``entry`` (so it holds none of entry's own files)."""
    return folder != entry and covers(entry, folder)


def _paths(value: Any) -> list[str] | None:
    """A list of paths from config; one string is one path (never its characters)."""
    if value is None:
        return None
    return [value] if isinstance(value, str) else [str(v) for v in value]
