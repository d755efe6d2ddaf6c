"""File I/O for the file tools, on paths already checked by :mod:`.paths`.

Opens go through :func:`agent_apps.host_files.open_regular`: ``O_NOFOLLOW`` (the path
was resolved before the check, so its last component is not a symlink unless someone
swapped one in since; then the open fails instead of following it), non-blocking, and
only a regular file is read or written: a FIFO or a device in the workspace is refused
instead of hanging the call.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..host_files import open_regular

__all__ = ["read_bytes", "write_bytes"]


def read_bytes(path: Path, limit: int) -> tuple[bytes, int]:
    """Up to ``limit`` bytes of ``path`` and its full size."""
    fd = open_regular(path)
    with os.fdopen(fd, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        return fh.read(limit), size


def write_bytes(path: Path, data: bytes, *, append: bool = False) -> None:
    """Write (or append) ``data``; parent directories must exist or be creatable."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = open_regular(path, os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else 0), 0o644)
    if not append:  # emptied only once it is known to be a regular file
        os.ftruncate(fd, 0)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
