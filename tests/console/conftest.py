"""The console under test: real runs in a real store, ``agent-apps console`` as a real
process, and a real browser (Debian's Chromium, driven by Playwright)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent_apps.testing.plugin import hermetic_manager

CHROMIUM = os.environ.get("AGENT_APPS_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
#: Seconds any one wait of these tests may take (a loaded 2-core machine).
BOUND = 60.0

#: A tool that waits until a file exists: the test decides when the call returns.
GATE = """
import asyncio, os
frontmatter = {
    "description": "Waits for a file.",
    "params": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
}
async def main(ctx, args):
    while not os.path.exists(args["path"]):
        await asyncio.sleep(0.01)
    return "opened"
"""
#: Agent code that writes a file (``% path``).
WRITE = "r = await ctx.manager.invoke('file-write', {'path': %r, 'content': 'hello\\n'})\nprint('wrote', r)"
#: Unattended, file-write asks (the default would deny it).
ASK_WRITE = {"security": {"mode": "unattended", "policy": {"unattended": {"ask": ["file-write"]}}}}


def _absent(why: str) -> None:
    """No browser here: fail under CI (which installs one), else skip saying how to get it."""
    message = (
        f"{why}: the console's browser tests need Chromium and Playwright for Python "
        "(apt-get install -y chromium; pip install -e '.[test]'; or AGENT_APPS_CHROMIUM=/path/to/chromium)"
    )
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture
async def page():
    """A page in Chromium, driven by Playwright's async API on the test's event loop
    (which also runs the agents the test starts)."""
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        _absent("playwright is not installed")
    if not os.path.exists(CHROMIUM):
        _absent(f"no browser at {CHROMIUM}")
    errors: list[str] = []
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, timeout=BOUND * 1000)
        try:
            context = await browser.new_context(viewport={"width": 1280, "height": 900})
            context.set_default_timeout(BOUND * 1000)
            opened = await context.new_page()
            opened.on("pageerror", lambda exc: errors.append(str(exc)))
            # the browser reports what the Content-Security-Policy refused on the console
            opened.on("console", lambda m: errors.append(m.text) if "Content Security Policy" in m.text else None)
            yield opened
        finally:
            await browser.close()
    assert not errors, errors  # no script error, nothing the page asked for refused


@dataclass
class Served:
    """A running ``agent-apps console``: its address, and the one with the token."""

    process: subprocess.Popen[str]
    base: str
    url: str
    token: str

    @property
    def host(self) -> str:
        return self.base.removeprefix("http://")

    @property
    def cookie(self) -> str:
        return f"agent_apps_console_{self.host.rsplit(':', 1)[1]}={self.token}"


@pytest.fixture
def store_path(tmp_path: Path) -> str:
    """Where the store the console serves is (a module may serve another backend)."""
    return str(tmp_path / "state.db")


@pytest.fixture
def manager(tmp_path: Path, store_path: str, skills_path: Path):
    """A manager whose runs go to the store the console serves."""
    return hermetic_manager([skills_path], tmp_path, state=store_path)


@pytest.fixture
def console(store_path: str, tmp_path: Path):
    """``agent-apps console --port 0`` on ``store_path``, stopped by Ctrl-C at the end."""
    env = {**os.environ, "AGENT_APPS_STATE": store_path}
    process = subprocess.Popen(
        [sys.executable, "-m", "agent_apps", "console", "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
    )  # fmt: skip
    try:
        line = process.stdout.readline()  # type: ignore[union-attr]
        found = re.fullmatch(r"agent-apps console: (http://[^/]+)/\?token=(\S+)\n", line)
        assert found, (line, process.stderr.read() if process.poll() is not None else "")  # type: ignore[union-attr]
        base, token = found.groups()
        yield Served(process, base, f"{base}/?token={token}", token)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=BOUND)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert process.returncode == 0, process.stderr.read()  # type: ignore[union-attr]


def scripted(turns: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"agent": "agent-scripted", "script": turns, **extra}
