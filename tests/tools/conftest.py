"""Fixtures for the tools tests: a hermetic manager with the tools plugin, a workspace
directory, and a fake ``kubectl`` on PATH that prints its argv as JSON."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest
from tools_helpers import make_manager

from agent_apps import ContextManager


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory outside every allowed path, with a file in it."""
    path = tmp_path / "outside"
    path.mkdir()
    (path / "secret.txt").write_text("top secret\n")
    return path


@pytest.fixture
def cm(workspace: Path, tmp_path: Path, skills_path: Path) -> ContextManager:
    return make_manager(workspace, tmp_path, search_path=[skills_path])


@pytest.fixture
def fake_bin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A bin directory first on PATH with ``kubectl`` and ``show-env`` scripts."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    scripts = {
        "kubectl": "import json, sys\nprint(json.dumps(sys.argv[1:]))\n",
        "show-env": "import json, os\nprint(json.dumps(dict(os.environ)))\n",
    }
    for name, body in scripts.items():
        path = bin_dir / name
        path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
        path.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    return bin_dir
