"""The WebAssembly sandbox that runs agent (LLM-written) Python code.

Full CPython, built with our guest runtime by componentize-py into a
pre-initialized WebAssembly component and run in-process by wasmtime: no host
files, environment, network, subprocesses or ctypes; bounded time, memory,
output, calls and payloads. See docs/sandbox.md.

Importing this package is cheap: wasmtime is imported on first use of
``Sandbox``, ``SandboxPool`` or ``build``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._limits import RunResult, SandboxLimits
from ._refs import is_bare_name

if TYPE_CHECKING:
    from ._host import Sandbox
    from ._pool import SandboxPool

__all__ = ["RunResult", "Sandbox", "SandboxLimits", "SandboxPool", "build", "cache_dir", "is_bare_name"]


def build(force: bool = False, *, quiet: bool = False):
    """Build and compile the sandbox component ahead of time; returns the cached path."""
    from ._build import build as _build

    return _build(force=force, quiet=quiet)


def cache_dir():
    """The directory holding the compiled component."""
    from ._build import cache_dir as _cache_dir

    return _cache_dir()


def __getattr__(name: str) -> Any:
    if name == "Sandbox":
        from ._host import Sandbox

        return Sandbox
    if name == "SandboxPool":
        from ._pool import SandboxPool

        return SandboxPool
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
