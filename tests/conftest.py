"""Shared fixtures: every test runs hermetically, away from the user's real config, home
and temporary folder (docs/testing.md, "The project's own suite"); the state store's
tests run against both backends (SQLite, and a throwaway PostgreSQL)."""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="session", autouse=True)
def _session_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The session's own home, temporary folder and agent-apps cache, removed at its end.

    Libraries write under ``~`` and the temporary folder on their own (Ray its token in
    ``~/.ray/auth_token``, its ``session_*`` folders, its workers' folders), and agent-apps
    keeps its parse cache and compiled sandbox under ``~/.cache/agent-apps``: here they all
    go to a folder of the session's. The compiled sandbox is the one thing worth keeping
    between sessions (it takes a minute to build): an artifact the user's own cache holds
    already is linked into the session's cache, read only, and else the session builds its
    own. The folder's path is short, under ``/tmp`` when the system's temporary folder has
    a long one: Ray's sockets live in it, ``ray/session_.../sockets/plasma_store``, and a
    socket's path is at most 107 bytes.
    """
    from agent_apps.sandbox._build import artifact_path

    tmp_path_factory.getbasetemp()  # pytest's own folders stay where they are
    shared = artifact_path()  # in the user's cache, from the environment as it was
    base = tempfile.gettempdir()
    root = Path(tempfile.mkdtemp(prefix="aa-tests-", dir="/tmp" if len(base) > 20 and os.path.isdir("/tmp") else base))
    home, tmp, cache = root / "home", root / "tmp", root / "home" / ".cache" / "agent-apps"
    for folder in (home, tmp, cache / "sandbox"):
        folder.mkdir(parents=True)
    # a temporary folder as the system's is: other users (the throwaway PostgreSQL server
    # runs as postgres under root) reach their own folders in it
    root.chmod(0o755)
    tmp.chmod(0o1777)
    if shared.is_file():
        (cache / "sandbox" / shared.name).symlink_to(shared)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(home))
        patch.setenv("TMPDIR", str(tmp))
        patch.setenv("AGENT_APPS_CACHE_DIR", str(cache))
        patch.delenv("XDG_CACHE_HOME", raising=False)
        patch.setattr(tempfile, "tempdir", None)  # tempfile reads TMPDIR again
        try:
            yield root
        finally:
            shutil.rmtree(root, ignore_errors=True)


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


def _unavailable(message: str, why: str = "CI must run the PostgreSQL tests: .ci/run installs it") -> None:
    """Skip, loudly (the reason shows in the summary); under CI what is missing fails."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{message} ({why})")
    pytest.skip(message)


@pytest.fixture(scope="session")
def embedder() -> object:
    """The real embedding model, all-MiniLM-L6-v2 run with numpy (agent_apps.state.embeddings):
    the test extra brings numpy and tokenizers, .ci/run the model's package."""
    from agent_apps.state.embeddings import EmbeddingsUnavailable, load_embedder

    try:
        return load_embedder()
    except EmbeddingsUnavailable as exc:
        why = "CI must run the semantic memory tests: the test extra and .ci/run install the embedding model"
        _unavailable(f"semantic memory tests skipped: {exc}", why)
        raise


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
