"""Random tokens and ids, drawn from a buffer of the operating system's CSPRNG.

``os.urandom`` is a system call that releases the GIL. On the event loop's thread,
each release lets the sandbox pool's or the store's thread take the GIL, and the loop
then waits to get it back. A run draws about seven of them: its two callback refs, its
run and agent ids, a seed per code run and the scripted provider's run id. So the
bytes come from one buffer, refilled from ``os.urandom`` 4 KiB at a time, and a draw is
a slice of it under a lock. The bytes are the same CSPRNG's as ``secrets``' and are
handed out once each. A forked child forgets the parent's buffer at once, so it never
hands out the tokens the parent hands out next.
"""

from __future__ import annotations

import base64
import os
import threading

__all__ = ["randbits", "token_bytes", "token_hex", "token_urlsafe", "uuid4_hex"]

#: Bytes read from ``os.urandom`` per refill: about 150 runs' worth of draws.
REFILL = 4096

_lock = threading.Lock()
_buffer = b""
_used = 0


def token_bytes(size: int) -> bytes:
    """``size`` random bytes, as ``secrets.token_bytes`` gives them."""
    global _buffer, _used
    with _lock:
        if _used + size > len(_buffer):
            _buffer, _used = os.urandom(max(REFILL, size)), 0
        start = _used
        _used += size
        return _buffer[start : start + size]


def token_hex(size: int) -> str:
    """``size`` random bytes as hex, as ``secrets.token_hex`` gives them."""
    return token_bytes(size).hex()


def token_urlsafe(size: int) -> str:
    """``size`` random bytes as URL-safe Base64 without padding, as ``secrets.token_urlsafe`` gives them."""
    return base64.urlsafe_b64encode(token_bytes(size)).rstrip(b"=").decode("ascii")


def randbits(bits: int) -> int:
    """A random int of ``bits`` bits, as ``secrets.randbits`` gives it."""
    return int.from_bytes(token_bytes((bits + 7) // 8), "big") >> (-bits % 8)


def uuid4_hex() -> str:
    """A random UUID (version 4) as 32 hex digits, as ``uuid.uuid4().hex`` gives it."""
    raw = bytearray(token_bytes(16))
    raw[6] = (raw[6] & 0x0F) | 0x40  # the version
    raw[8] = (raw[8] & 0x3F) | 0x80  # the RFC 4122 variant
    return raw.hex()


def _forget() -> None:
    """In a forked child: drop the parent's buffer, which the parent keeps drawing
    from, and take a new lock (another thread of the parent may have held it)."""
    global _buffer, _used, _lock
    _buffer, _used, _lock = b"", 0, threading.Lock()


os.register_at_fork(after_in_child=_forget)
