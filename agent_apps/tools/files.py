"""File I/O for the file tools, on paths already checked by :mod:`.paths`.

Opens use ``O_NOFOLLOW``: the path was resolved before the check, so its last
component is not a symlink unless someone swapped one in since; then the open fails
instead of following it.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["read_bytes", "write_bytes"]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def read_bytes(path: Path, limit: int) -> tuple[bytes, int]:
    """Up to ``limit`` bytes of ``path`` and its full size."""
    fd = os.open(path, os.O_RDONLY | _NOFOLLOW)
    with os.fdopen(fd, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        return fh.read(limit), size


def write_bytes(path: Path, data: bytes, *, append: bool = False) -> None:
    """Write (or append) ``data``; parent directories must exist or be creatable."""
    path.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | _NOFOLLOW | (os.O_APPEND if append else os.O_TRUNC)
    fd = os.open(path, flags, 0o644)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
