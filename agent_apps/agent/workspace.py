"""The agent's workspace (``model.workspace``): the files that make it this agent.

=============  ==================  ============================================
file           section             how it enters the system prompt
=============  ==================  ============================================
IDENTITY.md    # Your Identity     whole, every run (stable layer)
SOUL.md        # Core Guardrails   whole, every run: non-negotiable constraints
USER.md        # User Profile      whole, every run
MEMORY.md      # Your Memory       only the chunks most relevant to the user's
AGENTS.md                          message (see :mod:`agent_apps.state.memory`)
HEARTBEAT.md
=============  ==================  ============================================

The whole files pass through :func:`strip_markdown`, so the model reads compact text
without Markdown syntax, and each gets framing text that says how to read it. A file
longer than ``model.context.file_chars`` is cut, with a warning. Every file is read
as :mod:`agent_apps.host_files` reads on an agent's behalf: a link leading out of the
workspace, a FIFO, a device, a file in a denied path or one over
:data:`MAX_FILE_BYTES` is left out with a warning naming it. A relative
``model.workspace`` is relative to the file that set it (a config file, the skill file
for its ``metadata``); set by a call, to the working directory.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._markdown import strip_markdown
from ..host_files import HostFileRefused, check_host_file, read_host_text
from ..state.memory import MAX_MEMORY_BYTES

if TYPE_CHECKING:
    from ..manager import ContextManager
    from ..skill import Skill

__all__ = [
    "FRAMES",
    "MAX_FILE_BYTES",
    "MEMORY_FILES",
    "WholeFile",
    "WorkspaceFiles",
    "read_whole_files",
    "resolve_workspace",
]

#: The files read whole: (file, layer name, priority, heading and framing text).
FRAMES: tuple[tuple[str, str, int, str], ...] = (
    (
        "IDENTITY.md",
        "workspace.identity",
        20,
        "# Your Identity\n\nWho you are: your name, your role and how you communicate.",
    ),
    (
        "SOUL.md",
        "workspace.soul",
        30,
        "# Core Guardrails\n\nThese are your non-negotiable constraints. They override any user request.\n"
        "If a user asks you to violate a guardrail, refuse and explain why.",
    ),
    (
        "USER.md",
        "workspace.user",
        40,
        "# User Profile\n\nWhat you know about the user you work for: their preferences and details. "
        "Use it to fit your work to them.",
    ),
)
#: The files indexed for retrieval instead of read whole.
MEMORY_FILES = ("MEMORY.md", "AGENTS.md", "HEARTBEAT.md")
#: Characters of one whole file in the prompt, unless ``model.context.file_chars`` says.
FILE_CHARS = 8000
#: The largest whole file read at all (it is cut to ``file_chars`` after that).
MAX_FILE_BYTES = 1024 * 1024


@dataclass
class WholeFile:
    """One whole file's layer: its name, priority and framed text."""

    name: str
    priority: int
    text: str


@dataclass
class WorkspaceFiles:
    """What was read, and the problems worth a warning (each names its file)."""

    files: list[WholeFile] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def resolve_workspace(cm: ContextManager, skill: Skill, call: Mapping[str, Any] | None) -> Path | None:
    """The absolute workspace folder of ``skill``'s agent, or None when none is set.

    A relative path is relative to the folder of the config layer that set it: a config
    file's folder, the skill file's folder for its ``metadata``, the working directory
    for the defaults and the call.
    """
    value: str | None = None
    base = cm.cwd
    for layer in cm.cascade.layers(skill, call):
        model = layer.data.get("model")
        found = model.get("workspace") if isinstance(model, Mapping) else None
        if not isinstance(found, str) or not found:
            continue
        value = found
        if layer.data is skill.metadata and skill.path:
            base = Path(skill.path).parent
        elif layer.source not in ("defaults", "call"):
            base = Path(layer.source.removesuffix(" [tool.agent-apps]")).parent
        else:
            base = cm.cwd
    if value is None:
        return None
    return (base / Path(value).expanduser()).resolve()


def read_whole_files(folder: Path, *, max_chars: int = FILE_CHARS, denied: Sequence[str] = ()) -> WorkspaceFiles:
    """IDENTITY.md, SOUL.md and USER.md of ``folder``, stripped and framed (a missing
    file is no layer; an unreadable or refused one a warning). MEMORY.md and AGENTS.md
    are checked the same way, since memory retrieval skips a refused one: their warnings
    are here too. ``denied``: the path policy's denied entries besides the built-in ones."""
    out = WorkspaceFiles()
    if not folder.is_dir():
        out.warnings.append(f"model.workspace {str(folder)!r} is not a folder: no workspace files were read")
        return out
    for filename, name, priority, frame in FRAMES:
        path = folder / filename
        try:
            raw = read_host_text(path, limit=MAX_FILE_BYTES, folder=folder, denied=denied)
        except FileNotFoundError:
            continue
        except (OSError, UnicodeDecodeError) as exc:
            out.warnings.append(f"{_problem(path, exc)}; left out of the prompt")
            continue
        text = strip_markdown(raw)
        if not text:
            continue
        if len(text) > max_chars:
            out.warnings.append(
                f"{path}: {len(text)} characters, more than model.context.file_chars ({max_chars}); "
                f"the prompt holds its first {max_chars}"
            )
            text = text[:max_chars].rstrip() + f"\n[... {filename} cut: {len(text) - max_chars} more characters]"
        out.files.append(WholeFile(name, priority, f"{frame}\n\n{text}\n"))
    for filename in MEMORY_FILES:
        try:
            check_host_file(folder / filename, folder=folder, denied=denied, limit=MAX_MEMORY_BYTES)
        except HostFileRefused as exc:
            out.warnings.append(f"{exc}; memory retrieval leaves it out")
        except OSError:
            continue
    return out


def _problem(path: Path, exc: Exception) -> str:
    """Why ``path`` could not be read, naming it once."""
    return str(exc) if isinstance(exc, HostFileRefused) else f"{path}: cannot read it ({exc})"
