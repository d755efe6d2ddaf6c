"""The build cache: location, key, locking, atomic writes, the CLI entry."""

from __future__ import annotations

import io
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from agent_apps.sandbox import _build


def test_cache_dir_resolution(monkeypatch, tmp_path):
    monkeypatch.delenv("AGENT_APPS_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert _build.cache_dir() == tmp_path / "xdg" / "agent-apps" / "sandbox"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert _build.cache_dir() == tmp_path / "home" / ".cache" / "agent-apps" / "sandbox"
    monkeypatch.setenv("AGENT_APPS_CACHE_DIR", str(tmp_path / "override"))
    assert _build.cache_dir() == tmp_path / "override" / "sandbox"


def test_cache_key_covers_guest_sources_and_versions():
    key = _build.cache_key()
    assert key == _build.cache_key() and len(key) == 20
    names = {p.name for p in _build.guest_sources()}
    assert {"world.wit", "__init__.py", "_loop.py", "_runner.py"} <= names
    assert _build.artifact_path().name == f"guest-{key}.cwasm"


def test_concurrent_builds_build_once_and_never_expose_partial_files(monkeypatch, tmp_path):
    """Several threads (each its own flock) race a first-use build: one builds,
    the others wait and reuse it; the artifact only appears complete."""
    monkeypatch.setenv("AGENT_APPS_CACHE_DIR", str(tmp_path))
    builds: list[int] = []
    seen_partial: list[bool] = []

    def fake_componentize(tmp: Path, out: Path) -> None:
        builds.append(1)
        time.sleep(0.2)
        out.write_bytes(b"wasm")

    def fake_compile(wasm: Path) -> bytes:
        return b"X" * 1_000_000

    monkeypatch.setattr(_build, "_componentize", fake_componentize)
    monkeypatch.setattr(_build, "_compile_native", fake_compile)
    target = _build.artifact_path()
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            if target.exists():
                seen_partial.append(target.stat().st_size != 1_000_000)
            time.sleep(0.001)

    watcher = threading.Thread(target=watch)
    watcher.start()
    results: list[Path] = []
    threads = [threading.Thread(target=lambda: results.append(_build.build(quiet=True))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    watcher.join()
    assert builds == [1]
    assert results == [target] * 4
    assert not any(seen_partial)
    assert not list(tmp_path.glob("sandbox/*.tmp"))
    # force rebuilds; stale artifacts of other versions are pruned
    stale = target.with_name("guest-0000.cwasm")
    stale.write_bytes(b"old")
    assert _build.build(force=True, quiet=True) == target
    assert builds == [1, 1] and not stale.exists()


def test_build_failure_is_a_clear_error_and_leaves_no_artifact(monkeypatch, tmp_path):
    from agent_apps.errors import SandboxError

    monkeypatch.setenv("AGENT_APPS_CACHE_DIR", str(tmp_path))

    def broken(tmp: Path, out: Path) -> None:
        raise SandboxError("building the sandbox component failed (componentize-py exit 1):\nboom")

    monkeypatch.setattr(_build, "_componentize", broken)
    with pytest.raises(SandboxError, match="boom"):
        _build.build(quiet=True)
    assert not _build.artifact_path().exists()


def test_progress_shows_both_phases_in_a_log(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("AGENT_APPS_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(_build, "_componentize", lambda tmp, out: out.write_bytes(b"w"))
    monkeypatch.setattr(_build, "_compile_native", lambda wasm: b"c")
    _build.build()
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == f"agent-apps: building the sandbox component, once for this version ({_build.BUILD_TIME})"
    assert lines[1] == "agent-apps:   1/2 componentize-py: the guest and CPython into one component..."
    assert lines[2].startswith("agent-apps:   1/2 componentize-py: the guest and CPython into one component: done in ")
    assert lines[3] == "agent-apps:   2/2 wasmtime: compiling it to native code..."
    assert lines[4].startswith("agent-apps:   2/2 wasmtime: compiling it to native code: done in ")
    assert lines[5] == f"agent-apps:   cached at {_build.artifact_path()}" and len(lines) == 6


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_on_a_terminal_counts_the_seconds_of_each_phase(monkeypatch, tmp_path):
    """The first build takes a minute or two: on a terminal, each phase's line shows its
    seconds as they pass (rewritten in place), then how long it took, or that it failed."""
    from agent_apps.errors import SandboxError

    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setenv("AGENT_APPS_CACHE_DIR", str(tmp_path))

    def componentize(tmp: Path, out: Path) -> None:
        while terminal.getvalue().count("\r") < 2:  # until the ticker rewrote the line once
            time.sleep(0.01)
        out.write_bytes(b"w")

    def compile_native(wasm: Path) -> bytes:
        raise SandboxError("compiling failed")

    monkeypatch.setattr(_build, "_componentize", componentize)
    monkeypatch.setattr(_build, "_compile_native", compile_native)
    with pytest.raises(SandboxError):
        _build.build()
    shown = terminal.getvalue().split("\n")
    assert shown[0].startswith("agent-apps: building the sandbox component")
    phase = shown[1].split("\r")[1:]
    assert phase[0] == "agent-apps:   1/2 componentize-py: the guest and CPython into one component... 0 s"
    assert re.fullmatch(
        r"agent-apps:   1/2 componentize-py: the guest and CPython into one component\.\.\. \d+ s", phase[1]
    )
    assert phase[-1].startswith(
        "agent-apps:   1/2 componentize-py: the guest and CPython into one component... done in "
    )
    assert shown[2].split("\r")[-1].startswith(
        "agent-apps:   2/2 wasmtime: compiling it to native code... failed after "
    )


def test_module_entry_point_prints_the_cached_path():
    cmd = [sys.executable, "-m", "agent_apps.sandbox", "build"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(_build.artifact_path())
    assert Path(out.stdout.strip()).exists()


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_real_concurrent_first_use_builds(tmp_path):
    """Two processes build the real component into an empty cache at once."""
    import os

    env = dict(os.environ, AGENT_APPS_CACHE_DIR=str(tmp_path))
    code = (
        "import asyncio\nfrom agent_apps.sandbox import Sandbox\n"
        "async def main():\n    s = await Sandbox.start()\n    print((await s.run('6*7')).value)\n    await s.close()\n"
        "asyncio.run(main())"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [o[0].strip() for o in outs] == ["42", "42"], outs
    assert sum("building the sandbox component" in o[1] for o in outs) == 1
    assert len(list((tmp_path / "sandbox").glob("guest-*.cwasm"))) == 1
