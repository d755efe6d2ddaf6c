"""What discovery parsed from each skill file, kept between processes.

Every command scans the whole search path, and parsing is most of a scan's cost: a
syntax tree per code skill, YAML (and importing PyYAML) per prompt skill. So the
*parse* of each file (its frontmatter, the lines of its keys, where ``main`` is: what
:mod:`agent_apps.loading` reads from the text) is kept in one file per search-path
directory under ``$AGENT_APPS_CACHE_DIR/skills`` (else
``$XDG_CACHE_HOME/agent-apps/skills``, else ``~/.cache/agent-apps/skills``). Building
the :class:`~agent_apps.skill.Skill` from it, with every check, still happens each
time; files that fail to load are parsed each time, so their errors stay exact.

An entry is served only while its file is provably unchanged:

* it is keyed by path, size, inode, and modification *and* change time in
  nanoseconds. The change time cannot be set back (``touch -d`` or ``cp -p`` move the
  modification time only), so any write since gives another key;
* a file whose times are less than :data:`SETTLE_NS` old is not kept (git's "racily
  clean" rule): two writes within one tick of the file system's clock, leaving the same
  size, would otherwise share a key;
* the whole file is ignored when the agent-apps version, the Python version or the
  parsing code (:mod:`agent_apps.loading`, :mod:`agent_apps.config`) changed since it
  was written.

Processes share the files safely: each is written whole to a temporary name and
renamed into place, a reader sees the old or the new one, and an unreadable one counts
as empty, as does one that is not the user's own or that others may write. Values are
stored with :mod:`marshal`, the format of Python's own bytecode cache, which
round-trips every literal a frontmatter may hold; a value it cannot store (a YAML or
TOML date) leaves that file out.

The config cascade keeps the ``[tool.agent-apps]`` table of a project's
``pyproject.toml`` the same way (``kind="pyproject"``).
"""

from __future__ import annotations

import marshal
import os
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["SETTLE_NS", "ParseCache", "cache_dir", "cache_root"]

#: How old a file's times must be before its parse is kept (see the module docstring).
SETTLE_NS = 2_000_000_000
#: Cache files kept at most (one per search-path directory); the oldest go first.
MAX_FILES = 256
_FORMAT = 1


def cache_root() -> Path:
    """The base of agent-apps' caches (parses here, compiled sandboxes in ``sandbox/``):
    ``$AGENT_APPS_CACHE_DIR``, else ``$XDG_CACHE_HOME/agent-apps``, else
    ``~/.cache/agent-apps``."""
    override = os.environ.get("AGENT_APPS_CACHE_DIR")
    if override:
        return Path(override).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "agent-apps"


def cache_dir() -> Path:
    """Where the parse caches live (created on first write)."""
    return cache_root() / "skills"


class ParseCache:
    """The parses of the skill files under one search-path directory (or, with another
    ``kind``, of other files read at every start, kept apart from those).

    :meth:`get` answers from the file written by an earlier process; :meth:`put`
    records a fresh parse; :meth:`save` writes back what this scan saw (so entries of
    deleted files go), if anything changed.
    """

    def __init__(self, root: Path, kind: str = "skills") -> None:
        self.root = str(root)
        name = f"{kind}:{self.root}".encode("utf-8", "surrogateescape")
        import zlib

        self.file = cache_dir() / f"{kind}-{zlib.crc32(name):08x}{zlib.adler32(name):08x}.marshal"
        # path -> (key, the marshalled parse): each get() hands out a fresh copy, so
        # what the caller does with it never reaches the cache
        self._old: dict[str, tuple[tuple[int, ...], bytes]] | None = None
        self._new: dict[str, tuple[tuple[int, ...], bytes]] = {}
        self._keys: dict[str, tuple[int, ...] | None] = {}
        self._now = time.time_ns()

    def get(self, path: str) -> Any:
        """The kept parse of ``path``, or None (unknown, changed, or too fresh to tell)."""
        key = self._key(path)
        if key is None:
            return None
        if self._old is None:
            self._old = self._read()
        entry = self._old.get(path)
        if not isinstance(entry, tuple) or len(entry) != 2 or entry[0] != key:
            return None
        try:
            parsed = marshal.loads(entry[1])
        except (EOFError, ValueError, TypeError):
            return None
        self._new[path] = entry
        return parsed

    def put(self, path: str, parsed: Any) -> None:
        """Keep ``parsed``, the parse of ``path`` as it was when :meth:`get` looked."""
        key = self._keys.get(path)
        if key is None:
            return
        try:
            self._new[path] = (key, marshal.dumps(parsed))
        except ValueError:  # not a plain literal (a YAML date): parse it each time
            return

    def save(self) -> None:
        """Write the entries of this scan, unless they are those already on disk."""
        old = self._old if self._old is not None else self._read() if self._new else {}
        if self._new == old:
            return
        try:
            data = marshal.dumps((_stamp(), self.root, self._new))
            self.file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            created = not self.file.exists()
            tmp = self.file.with_name(f"{self.file.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
            with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as fh:
                fh.write(data)
            os.replace(tmp, self.file)
            if created:
                _prune(self.file.parent)
        except OSError:  # a read-only or full cache directory only costs speed
            return

    # -- internals -------------------------------------------------------------------

    def _key(self, path: str) -> tuple[int, ...] | None:
        """The identity of ``path`` now, or None if it is too fresh to be kept."""
        try:
            st = os.stat(path)
        except OSError:
            key = None
        else:
            settled = max(st.st_mtime_ns, st.st_ctime_ns) < self._now - SETTLE_NS
            key = (st.st_size, st.st_ino, st.st_mtime_ns, st.st_ctime_ns) if settled else None
        self._keys[path] = key
        return key

    def _read(self) -> dict[str, tuple[tuple[int, ...], bytes]]:
        try:
            with open(self.file, "rb") as fh:
                if not _private(os.fstat(fh.fileno())):
                    return {}
                stamp, root, entries = marshal.load(fh)
        except (OSError, EOFError, ValueError, TypeError):
            return {}
        if stamp != _stamp() or root != self.root or not isinstance(entries, dict):
            return {}
        return entries


_STAMP: tuple[Any, ...] | None = None


def _stamp() -> tuple[Any, ...]:
    """What the cached parses depend on besides the files: the format, agent-apps, Python
    and the parsing code itself (an edited checkout counts)."""
    global _STAMP
    if _STAMP is None:
        from . import __version__

        code = []
        for name in ("loading.py", "config.py"):  # what parses skill files, pyproject.toml
            try:
                st = os.stat(os.path.join(os.path.dirname(__file__), name))
                code.append((st.st_size, st.st_mtime_ns))
            except OSError:
                code.append((0, 0))
        _STAMP = (_FORMAT, __version__, sys.version, tuple(code))
    return _STAMP


def _private(st: os.stat_result) -> bool:
    """Only a cache file of this user that nobody else may write is believed (a shared
    ``AGENT_APPS_CACHE_DIR`` must not let another user rewrite skills' frontmatter)."""
    getuid = getattr(os, "getuid", None)
    return getuid is None or (st.st_uid == getuid() and not st.st_mode & 0o022)


def _prune(directory: Path) -> None:
    """Keep the newest :data:`MAX_FILES` cache files (the search paths in use)."""
    try:
        files = [(entry.stat().st_mtime_ns, entry.path) for entry in os.scandir(directory) if entry.is_file()]
    except OSError:
        return
    if len(files) <= MAX_FILES:
        return
    for _, path in sorted(files)[: len(files) - MAX_FILES]:
        try:
            os.unlink(path)
        except OSError:
            pass
