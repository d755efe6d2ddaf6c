"""One shape for the public names a package loads lazily (PEP 562).

A package whose public names are costly to import (asyncio, wasmtime, mcp, boto3)
lists where each one lives, ``{name: submodule}``, and takes its module
``__getattr__`` and ``__dir__`` from :func:`lazy_exports`. A listed name is imported
on first access and then kept as a plain attribute; any other name is an
AttributeError. The same names are imported under ``if TYPE_CHECKING:`` in the package,
for type checkers, and ``tests/test_cli.py`` checks that every one resolves.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, where: Mapping[str, str], public: Iterable[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``, whose names in ``where``
    live in the submodules it maps them to (relative names: ``"errors"``)."""
    names = sorted(public)

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        import importlib

        value = getattr(importlib.import_module(f".{module}", package), name)
        setattr(sys.modules[package], name, value)  # the next access is a plain attribute
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *names})

    return __getattr__, __dir__
