"""Build, compile and cache the sandbox component.

Two slow steps happen once per (guest source, componentize-py version,
wasmtime version, engine settings, platform): ``componentize-py`` turns the
guest package + WIT world + CPython into a pre-initialized component, and
wasmtime compiles it to native code, which we serialize (:data:`BUILD_TIME`
for both; docs/sandbox.md has the measurements). Each phase shows on stderr. The cache
key covers all of those because a serialized component only loads into the
same wasmtime version with the same engine settings.

The cache lives in ``$AGENT_APPS_CACHE_DIR/sandbox`` or
``$XDG_CACHE_HOME/agent-apps/sandbox`` or ``~/.cache/agent-apps/sandbox``.
Concurrent first uses (several processes, pytest-xdist) serialize on a file
lock, and the artifact is written to a temp file then renamed, so a reader
never sees a half-written file.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path

HERE = Path(__file__).parent
WIT_FILE = HERE / "world.wit"
GUEST_DIR = HERE / "guest"
GUEST_APP = "sandbox_guest"
WORLD = "sandbox"
#: Engine settings baked into the compiled artifact (see _engine.engine_config).
ENGINE_SETTINGS = "epoch_interruption=1;max_wasm_stack=default;concurrency_support=0;v1"


def cache_dir() -> Path:
    """Where compiled components are cached (created on demand)."""
    from ..parse_cache import cache_root

    return cache_root() / "sandbox"


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "missing"


def guest_sources() -> list[Path]:
    files = [WIT_FILE]
    files += sorted(p for p in GUEST_DIR.rglob("*.py") if "__pycache__" not in p.parts)
    return files


def cache_key() -> str:
    """Hash of everything the compiled artifact depends on."""
    h = hashlib.sha256()
    for p in guest_sources():
        h.update(p.relative_to(HERE).as_posix().encode() + b"\0")
        h.update(p.read_bytes() + b"\0")
    import platform

    for part in (
        "componentize-py=" + _version("componentize-py"),
        "wasmtime=" + _version("wasmtime"),
        ENGINE_SETTINGS,
        platform.machine(),
        sys.platform,
    ):
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:20]


def artifact_path() -> Path:
    return cache_dir() / f"guest-{cache_key()}.cwasm"


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as f:
        try:
            import fcntl
        except ImportError:  # Windows: no advisory lock; the atomic rename still protects readers
            yield
            return
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def _say(msg: str, quiet: bool) -> None:
    if not quiet:
        print(f"agent-apps: {msg}", file=sys.stderr, flush=True)


#: What the first build takes, as the messages and docs/sandbox.md say (measured there).
BUILD_TIME = "about 30 s on a 2-core machine, up to 2 minutes when it is busy"


@contextmanager
def _phase(step: str, quiet: bool) -> Iterator[None]:
    """Show one phase of the build on stderr: on a terminal, one line whose seconds count
    up while it runs; elsewhere (a log, CI), a line when it starts and one when it ends."""
    if quiet:
        yield
        return
    stream = sys.stderr
    live = stream.isatty()
    start = time.monotonic()
    stop = threading.Event()

    def show(end: str) -> None:
        stream.write(f"\ragent-apps:   {step}... {time.monotonic() - start:.0f} s{end}")
        stream.flush()

    def tick() -> None:
        while not stop.wait(1):
            show("")

    ticker = threading.Thread(target=tick, name="agent-apps-sandbox-build", daemon=True)
    if live:
        show("")
        ticker.start()
    else:
        _say(f"  {step}...", quiet)
    outcome = "failed after"
    try:
        yield
        outcome = "done in"
    finally:
        stop.set()
        if live:
            ticker.join()
            stream.write(f"\ragent-apps:   {step}... {outcome} {time.monotonic() - start:.1f} s\n")
            stream.flush()
        else:
            _say(f"  {step}: {outcome} {time.monotonic() - start:.1f} s", quiet)


def build(force: bool = False, *, quiet: bool = False) -> Path:
    """Build and compile the sandbox component if it is not cached; return its path.

    ``force`` rebuilds even when a cached artifact exists. Safe to call from
    several processes at once. Unless ``quiet``, its two phases show on stderr.
    """

    target = artifact_path()
    if target.exists() and not force:
        return target
    with _file_lock(target.with_suffix(".lock")):
        if target.exists() and not force:
            return target  # another process built it while we waited
        _say(f"building the sandbox component, once for this version ({BUILD_TIME})", quiet)
        with tempfile.TemporaryDirectory(prefix="agent-apps-sandbox-") as tmp:
            wasm = Path(tmp) / "guest.wasm"
            with _phase("1/2 componentize-py: the guest and CPython into one component", quiet):
                _componentize(Path(tmp), wasm)
            with _phase("2/2 wasmtime: compiling it to native code", quiet):
                compiled = _compile_native(wasm)
            fd, tmp_target = tempfile.mkstemp(dir=target.parent, prefix=target.name + ".", suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(compiled)
                os.replace(tmp_target, target)
            except BaseException:
                with _suppress():
                    os.unlink(tmp_target)
                raise
        _say(f"  cached at {target}", quiet)
        _prune(target)
        return target


@contextmanager
def _suppress() -> Iterator[None]:
    try:
        yield
    except OSError:
        pass


def _compile_native(wasm: Path) -> bytes:
    """Compile the component to native code with the sandbox engine settings."""
    from wasmtime.component import Component

    from ._engine import new_engine

    return bytes(Component.from_file(new_engine(), str(wasm)).serialize())


def _componentize(tmp: Path, out: Path) -> None:
    """Run componentize-py on a private copy of the guest (so nothing else leaks in)."""
    import importlib.util

    if importlib.util.find_spec("componentize_py") is None:
        from ..errors import SandboxError

        raise SandboxError(
            "building the sandbox component needs componentize-py: pip install 'agent-apps[sandbox]'"
        )
    src = tmp / "src"
    shutil.copytree(GUEST_DIR, src, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    wit = tmp / "wit"
    wit.mkdir()
    shutil.copy(WIT_FILE, wit / "world.wit")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    cmd = [
        sys.executable, "-c",
        "import sys; from componentize_py import script; sys.argv[0] = 'componentize-py'; script()",
        "-q", "-d", str(wit), "-w", WORLD,
        "componentize", GUEST_APP, "-p", str(src), "-o", str(out),
    ]
    proc = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True)
    if proc.returncode != 0 or not out.exists():
        from ..errors import SandboxError

        detail = (proc.stderr or proc.stdout or "").strip()[-4000:]
        raise SandboxError(f"building the sandbox component failed (componentize-py exit {proc.returncode}):\n{detail}")


def _prune(keep: Path) -> None:
    """Delete artifacts of other guest/tool versions (they are never loaded again)."""
    for p in [*keep.parent.glob("guest-*.cwasm"), *keep.parent.glob("guest-*.lock")]:
        if p.stem != keep.stem:
            with _suppress():
                p.unlink()
