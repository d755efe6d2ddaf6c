"""Files the host opens itself: read on an agent's behalf, or written for the user.

**Reading.** Some files reach an agent without any tool call: the workspace files in
its system prompt (``IDENTITY.md``, ``SOUL.md``, ``USER.md``), the memory files it
searches (``MEMORY.md``, ``AGENTS.md``, ``HEARTBEAT.md``) and the embedding model's
files, the bodies of guidance skills, config files and ``tools.yaml``. Someone else may
have put any of them there: a link to ``~/.ssh/id_rsa``, a FIFO that never ends, a link
to ``/dev/zero``. So :func:`read_host_file` holds every such read to one property:

* the file lies **inside its folder** once links are resolved (a link to another file
  of the folder is fine; the folder's own path may be a link);
* it is not inside a **denied path** of the path policy (:data:`BUILTIN_DENIED`, the
  credentials folders, and whatever the caller adds);
* it is a **regular file**: it is opened non-blocking and without following a link in
  its last component, then ``fstat`` must say regular, so a FIFO or a device is never
  read (and opening one never waits for a writer);
* it is at most ``limit`` bytes, and no more than that is ever read.

Anything else raises :class:`HostFileRefused`, an ``OSError`` that names the file and
why. Callers skip the file with a warning and go on (a config file is an error
instead: skipping it would drop its settings, ``security.policy.deny`` among them).

What this does not stop: a file changed between two reads of it; the check of the
resolved path and the open are two steps, but on Linux the opened file's own path
(``/proc/self/fd``) is checked again, which closes that window there.

**Writing.** What agent-apps writes for the user under its home (the state store, the
logs of mounted MCP servers, the audit log) is private: :func:`private_folder` makes
missing folders ``0700``, and :func:`private_file` keeps a file ``0600``, whatever the
umask, tightening one that was made wider.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from fnmatch import fnmatchcase
from pathlib import Path

__all__ = [
    "BUILTIN_DENIED",
    "HostFileRefused",
    "check_host_file",
    "covers",
    "open_regular",
    "private_file",
    "private_folder",
    "read_host_file",
    "read_host_text",
]

#: Denied for the file tools (unless ``security.builtin_denied_paths: false``) and for
#: every file the host reads on an agent's behalf: where credentials live.
BUILTIN_DENIED: tuple[str, ...] = (
    "~/.ssh",
    "~/.gnupg",
    "~/.aws",
    "~/.azure",
    "~/.config/gcloud",
    "~/.kube",
    "~/.docker",
    "~/.netrc",
    "~/.git-credentials",
    "~/.pypirc",
    "/etc/shadow",
    "/etc/gshadow",
    "/etc/sudoers",
    "/etc/passwd",
)

_GLOB_CHARS = frozenset("*?[")
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class HostFileRefused(OSError):
    """A file the host will not read for an agent: ``path`` and ``reason`` say which and why."""

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        super().__init__(reason)
        self.path = str(path)
        self.reason = reason

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


def covers(entry: str, path: str) -> bool:
    """Whether the path-policy entry ``entry`` (a folder, a file or a glob) holds ``path``."""
    if _GLOB_CHARS & set(entry):
        return fnmatchcase(path, entry) or fnmatchcase(path, entry.rstrip("/") + "/*")
    return path == entry or path.startswith(entry.rstrip(os.sep) + os.sep)


def check_host_file(
    path: str | os.PathLike[str],
    *,
    folder: str | os.PathLike[str] | None,
    denied: Sequence[str] = (),
    limit: int | None = None,
) -> str:
    """The resolved path of ``path`` once it is known to lie inside ``folder`` (None:
    anywhere), outside every denied path, and to be a regular file of at most ``limit``
    bytes; :class:`HostFileRefused` otherwise, ``FileNotFoundError`` when there is no
    such file. Nothing is opened: :func:`read_host_file` checks again what it opens."""
    named = os.path.abspath(path)
    real = os.path.realpath(named)
    if folder is not None:
        home = os.path.realpath(folder)
        if not covers(home, real) or real == home:
            raise HostFileRefused(named, f"leads outside its folder {folder} (to {real})")
    for entry in (*_builtin_denied(), *denied):
        if covers(entry, real):
            raise HostFileRefused(named, f"is inside denied path {entry}" + ("" if real == named else f" ({real})"))
    info = os.stat(real)  # FileNotFoundError for a file (or a link's target) that is not there
    _check_kind(named, info, limit)
    return real


def open_regular(path: str | os.PathLike[str], flags: int = os.O_RDONLY, mode: int = 0o666) -> int:
    """An open descriptor of the regular file ``path`` (``flags`` besides the ones
    added here: non-blocking, no link followed in the last component, close-on-exec).
    A FIFO, a device, a socket or a folder is closed again and refused."""
    try:
        fd = os.open(path, flags | _NONBLOCK | _NOFOLLOW | _CLOEXEC, mode)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a FIFO nobody reads, opened to write; an absent device
            raise HostFileRefused(path, "is a FIFO or a device, not a regular file") from None
        raise
    try:
        _check_kind(path, os.fstat(fd), None)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_host_file(
    path: str | os.PathLike[str], *, limit: int, folder: str | os.PathLike[str] | None, denied: Sequence[str] = ()
) -> bytes:
    """The bytes of ``path``, held to the module's property (see its docstring):
    :class:`HostFileRefused` for a file it refuses, ``FileNotFoundError`` when there is
    none, another ``OSError`` when reading failed."""
    real = check_host_file(path, folder=folder, denied=denied, limit=limit)
    try:
        fd = open_regular(real)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a link swapped in since the check
            raise HostFileRefused(path, "became a link while it was being opened") from None
        raise
    with os.fdopen(fd, "rb") as fh:
        opened = _opened_path(fd)
        if opened is not None and opened != real:  # a folder on the way was swapped for a link since the check
            check_host_file(opened, folder=folder, denied=denied)
        _check_kind(path, os.fstat(fd), limit)
        data = fh.read(limit + 1)
    if len(data) > limit:  # it grew while it was read
        raise HostFileRefused(path, f"is larger than {limit // 1024} KB (it grew while it was read)")
    return data


def read_host_text(
    path: str | os.PathLike[str], *, limit: int, folder: str | os.PathLike[str] | None, denied: Sequence[str] = ()
) -> str:
    """:func:`read_host_file` decoded as UTF-8 (a byte-order mark is dropped);
    ``UnicodeDecodeError`` when it is not."""
    return read_host_file(path, limit=limit, folder=folder, denied=denied).decode("utf-8-sig")


def _check_kind(path: str | os.PathLike[str], info: os.stat_result, limit: int | None) -> None:
    """Refuse what is not a regular file, or is larger than ``limit`` bytes."""
    if not stat.S_ISREG(info.st_mode):
        kind = next((name for test, name in _KINDS if test(info.st_mode)), "not a regular file")
        raise HostFileRefused(path, f"is {kind}, not a regular file")
    if limit is not None and info.st_size > limit:
        raise HostFileRefused(path, f"is larger than {limit // 1024} KB ({info.st_size:,} bytes)")


def private_folder(path: str | os.PathLike[str], *, tighten: bool = False) -> Path:
    """``path`` as a folder, each missing level of it made ``0700``; with ``tighten``,
    an existing one that others may enter is made ``0700`` too (one of ours)."""
    folder = Path(path)
    missing = []
    probe = folder
    while not probe.exists() and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    for level in reversed(missing):
        try:
            level.mkdir(mode=0o700)
        except FileExistsError:  # another process made it meanwhile
            continue
        os.chmod(level, 0o700)  # mkdir's mode passes through the umask
    if tighten and not missing:
        info = folder.stat()
        if info.st_mode & 0o077 and info.st_uid == os.getuid():
            os.chmod(folder, stat.S_IMODE(info.st_mode) & 0o700)
    return folder


def private_file(path: str | os.PathLike[str]) -> None:
    """Make ``path`` ``0600`` if it exists and others may read or write it (only a file
    of this user: another user's file is left as it is)."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return
    if info.st_mode & 0o077 and info.st_uid == os.getuid():
        os.chmod(path, stat.S_IMODE(info.st_mode) & 0o600)


_resolved_denied: dict[str, tuple[str, ...]] = {}


def _builtin_denied() -> tuple[str, ...]:
    """:data:`BUILTIN_DENIED` made absolute and resolved (``~`` may be a link), once
    per home folder."""
    home = os.path.expanduser("~")
    found = _resolved_denied.get(home)
    if found is None:
        found = _resolved_denied[home] = tuple(os.path.realpath(os.path.expanduser(e)) for e in BUILTIN_DENIED)
    return found


def _opened_path(fd: int) -> str | None:
    """Where the open descriptor ``fd`` really is (Linux), else None."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None
