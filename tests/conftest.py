"""Shared fixtures: every test runs hermetically, away from the user's real config."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _hermetic(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("AGENT_APPS_HOME", str(home / ".agent-apps"))
    monkeypatch.delenv("AGENT_APPS_PATH", raising=False)
    monkeypatch.delenv("AGENT_APPS_STATE", raising=False)
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def repo_root() -> Path:
    return Path(__file__).resolve().parent.parent
