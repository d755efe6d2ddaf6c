"""Shared fixtures: every test runs hermetically, away from the user's real config; the
state store's tests run against both backends (SQLite, and a throwaway PostgreSQL)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
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


# -- the state store's backends ----------------------------------------------------------------


def _unavailable(message: str) -> None:
    """Skip, loudly (the reason shows in the summary); under CI a missing server fails."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{message} (CI must run the PostgreSQL tests: .ci/run installs it)")
    pytest.skip(message)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[object]:
    """One throwaway PostgreSQL server for the whole test session, started the first time
    a test asks for it (agent_apps.testing.postgres), stopped and removed at the end."""
    from agent_apps.testing.postgres import PostgresServer, postgres_bindir

    if postgres_bindir() is None:
        _unavailable("PostgreSQL tests skipped: no server binaries (initdb, pg_ctl); apt-get install -y postgresql")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _unavailable("PostgreSQL tests skipped: psycopg is not installed; pip install -e '.[postgres]'")
    server = PostgresServer(settings={"fsync": "off", "max_connections": "400"}).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres_url(postgres_server) -> Iterator[str]:
    """A new, empty store on the test server: a schema of its own (``?schema=``)."""
    yield postgres_server.url("tests", schema=f"t_{uuid.uuid4().hex[:12]}")  # type: ignore[attr-defined]
    from agent_apps.state import _postgres

    _postgres.close_all()


@pytest.fixture(params=["sqlite", "postgresql"])
def state_location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a new, empty state store is: each test that takes it runs on both backends."""
    if request.param == "sqlite":
        return str(tmp_path / "state.db")
    return str(request.getfixturevalue("postgres_url"))
