"""Fixtures for the sandbox tests: a real component, real wasmtime, no mocks.

The compiled component is built once per session into the session's cache, unless the
user's cache has it already (see tests/conftest.py), and shared by every test.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("wasmtime")
pytest.importorskip("componentize_py")


@pytest.fixture(scope="session", autouse=True)
def _component_built() -> None:
    from agent_apps.sandbox import build

    build()


class Host:
    """A recording ``call_host``: a few toy skills and a log of every call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.options: list[dict[str, Any]] = []  # the call options of each call ({} when none)

    async def __call__(self, name: str, args: dict | None, **options: Any) -> Any:
        self.calls.append((name, args))
        self.options.append(options)
        if name == "echo":
            return args
        if name == "sleep":
            await asyncio.sleep((args or {}).get("seconds", 0.3))
            return "slept"
        if name == "fail":
            raise ValueError((args or {}).get("message", "it failed"))
        if name == "not-allowed":
            from agent_apps.errors import ToolNotAllowed

            raise ToolNotAllowed("agent", "not-allowed", "not in allowed-tools")
        if name == "big":
            return "x" * int((args or {}).get("size", 10))
        if name == "weird":
            return {1, 2}
        if name == "add":
            return args["a"] + args["b"]
        return {"called": name, "args": args}


@pytest.fixture
def host() -> Host:
    return Host()


@pytest.fixture
async def sb(host: Host):
    from agent_apps.sandbox import Sandbox, SandboxLimits

    s = await Sandbox.start(memory={"seed": 1}, limits=SandboxLimits(timeout=5), call_host=host)
    try:
        yield s
    finally:
        await s.close()
