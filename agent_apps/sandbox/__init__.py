"""The WebAssembly sandbox that runs agent (LLM-written) Python code.

Full CPython, built with our guest runtime by componentize-py into a
pre-initialized WebAssembly component and run in-process by wasmtime: no host
files, environment, network, subprocesses or ctypes; bounded time, memory,
output, calls and payloads. See docs/sandbox.md.

Importing this package is cheap: wasmtime is imported on first use of
``Sandbox``, ``SandboxPool`` or ``build``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports
from ._limits import RunResult, SandboxLimits
from ._refs import is_bare_name

if TYPE_CHECKING:
    from ._build import build, cache_dir
    from ._host import Sandbox
    from ._pool import SandboxPool

__all__ = ["RunResult", "Sandbox", "SandboxLimits", "SandboxPool", "build", "cache_dir", "is_bare_name"]

#: Where the names that need wasmtime live: imported on first access (_lazy.py).
#: ``build`` builds and compiles the component ahead of time and returns the cached
#: path; ``cache_dir`` is the directory holding it.
_LAZY = {"build": "_build", "cache_dir": "_build", "Sandbox": "_host", "SandboxPool": "_pool"}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__)
