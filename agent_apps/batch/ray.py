"""A batch spread over a Ray cluster (``agent-apps batch --ray``; the ``ray`` extra).

Imported only by a batch on Ray: nothing else in agent-apps imports ray.

* **Workers** are Ray actors, one CPU each, one per CPU of the cluster (no more than
  the batch's concurrency). Each builds one :class:`ContextManager` when it starts and
  keeps it, and with it its sandbox pool, warm for every input it runs; it runs several
  inputs at once (an async actor), ``concurrency / workers`` of them.
* **The job** travels with the workers: the search path directories, the project's
  ``./skills`` and config file, and the user's ``config.yaml`` and ``skills/`` zipped
  into one argument of the workers' constructor (:func:`pack`; :data:`MAX_JOB_BYTES`
  at most), which Ray keeps for restarts (inline when small, else in its object store,
  owned by the driver); each worker unpacks it into a folder of its own. Ray's
  ``runtime_env`` cannot carry local folders for a single actor (only for a whole job,
  at ``ray.init``), and a batch must also run on a Ray the caller already connected.
* **Results** stream back in completion order: the driver keeps ``concurrency`` calls
  in flight, each on the least-loaded worker, and collects them with ``ray.wait``.
* **A worker that dies** is restarted by Ray (``max_restarts=-1``), on any node with a
  free CPU, and the inputs it was running are run again (Ray's ``max_task_retries``,
  the batch's ``retries``); an input whose retries are spent is that input's error
  (``WorkerDied``). Each input still gets exactly one result.
* **The state store** is per worker (``<agent-apps home>/batch/<batch>/worker-<pid>.db``
  on its node) unless this manager's store was chosen explicitly (``state=``,
  ``AGENT_APPS_STATE`` or ``state.path``): then every worker opens that same path, which
  must be shared storage every node sees at that path. SQLite over a network file
  system is not safe (its locks are unreliable there): see docs/batch.md.
"""

from __future__ import annotations

import asyncio
import faulthandler
import functools
import io
import logging
import math
import os
import secrets
import shutil
import tempfile
import zipfile
from collections.abc import AsyncGenerator, AsyncIterable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import AgentAppsError
from .runner import RUNS_PER_CPU, BatchInput, BatchResult, aiter_inputs, rejected, run_one


def _import_ray() -> Any:
    """``import ray``, without Ray's crash handler in this process.

    The sandbox's WebAssembly traps (a stack overflow, ``unreachable``) arrive as signals
    that wasmtime's handlers must see first; Ray, when imported, schedules absl's failure
    signal handler for ``ray.init``, installed over wasmtime's (and reset to the default
    by ``ray.shutdown``): a sandbox trap in this process would then kill it. Ray reads
    ``RAY_DISABLE_FAILURE_SIGNAL_HANDLER`` at import; the workers, started later without
    it, keep Ray's handler, under wasmtime's (installed when their first sandbox starts).
    """
    name = "RAY_DISABLE_FAILURE_SIGNAL_HANDLER"
    saved = os.environ.get(name)
    os.environ[name] = "1"
    try:
        import ray as module
    finally:
        if saved is None:
            del os.environ[name]
        else:
            os.environ[name] = saved
    return module


ray = _import_ray()

if TYPE_CHECKING:
    from ..manager import ContextManager
    from ..skill import Skill

__all__ = ["MAX_JOB_BYTES", "BatchWorker", "RayRunner", "pack"]

#: The most the shipped search path and config may hold, unpacked.
MAX_JOB_BYTES = 100 * 2**20
#: How long the workers may take to start (a cluster may have to add a node).
START_TIMEOUT = 300.0
_SKIPPED_DIRS = {"__pycache__", ".git", ".hg", ".svn", ".venv", "node_modules"}


# -- the job: what each worker needs to build the same ContextManager ---------------------


def pack(cm: ContextManager, skill: Skill, batch_id: str) -> tuple[bytes, dict[str, Any]]:
    """Zip what defines ``cm`` (its search path directories, the project's skills and
    config file, the user's config and skills) and describe it in a manifest.

    Installed skill packages and the bundled skills are not shipped: the workers have
    their own (the same agent-apps and packages must be installed on every node).
    """
    layers = cm._layers
    manifest: dict[str, Any] = {
        "batch": batch_id,
        "skill": skill.name,
        "paths": [],
        "project": layers["project"],
        "user": layers["user"],
        "bundled": layers["bundled"],
        "entry_points": cm._entry_points,
        "max_depth": cm.max_depth,
        "state": _shared_state(cm),
    }
    if cm._plugins or cm._middleware:
        raise AgentAppsError(
            "a batch on Ray cannot ship the plugins or middleware given to ContextManager(...) in Python: "
            "install them on every node as a package (the agent_apps entry points), or use middleware skills"
        )
    buffer = io.BytesIO()
    zipped = _Zip(buffer)
    with zipped:
        for root in cm.roots():
            if not root.path.is_dir():
                continue
            if root.origin == "path":
                where = f"path/{len(manifest['paths'])}"
                manifest["paths"].append(where)
            elif root.origin == "project":
                where = "project/skills"
            elif root.origin == "user":
                where = "home/skills"
            else:  # packages and bundled skills: installed on the workers
                continue
            zipped.tree(root.path, where)
        if layers["project"]:
            project = cm.cascade.project_file()
            if project is not None and project.path:
                zipped.file(Path(project.path), f"project/{Path(project.path).name}")
        if layers["user"] and (cm.home / "config.yaml").is_file():
            zipped.file(cm.home / "config.yaml", "home/config.yaml")
    return buffer.getvalue(), manifest


class _Zip:
    """A zip being written, that counts what it holds against :data:`MAX_JOB_BYTES`."""

    def __init__(self, buffer: io.BytesIO) -> None:
        self.zip = zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED)
        self.size = 0
        self.largest: tuple[int, str] = (0, "")

    def __enter__(self) -> _Zip:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.zip.close()

    def tree(self, root: Path, where: str) -> None:
        for folder, dirs, files in os.walk(root, followlinks=True):
            dirs[:] = sorted(d for d in dirs if d not in _SKIPPED_DIRS)
            for name in sorted(files):
                if not name.endswith((".pyc", ".db", ".db-wal", ".db-shm")):
                    path = Path(folder, name)
                    self.file(path, f"{where}/{path.relative_to(root).as_posix()}")

    def file(self, path: Path, name: str) -> None:
        size = path.stat().st_size
        self.size += size
        self.largest = max(self.largest, (size, str(path)))
        if self.size > MAX_JOB_BYTES:
            raise AgentAppsError(
                f"the search path and config to ship to the Ray workers hold more than {_size(MAX_JOB_BYTES)} "
                f"(the largest file: {self.largest[1]}, {_size(self.largest[0])}): keep data out of skill "
                "directories, and give the skills paths or URLs every node can read"
            )
        self.zip.write(path, name)


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n} bytes"


def _shared_state(cm: ContextManager) -> str | None:
    """The state store every worker opens, when this manager's was chosen explicitly
    (``state=``, ``AGENT_APPS_STATE``, ``state.path``): a PostgreSQL URL as it is (its
    password included: the workers connect with it), a file as an absolute path; None:
    one store per worker."""
    from ..state import StateStore, is_postgres_url, state_path

    chosen = cm._state
    if isinstance(chosen, StateStore):
        chosen = chosen.db.location
    if chosen is None:
        found = state_path(cm.cascade, cm.home)
        chosen = found if found != str(cm.home / "state.db") else None
    if chosen is None or str(chosen) == ":memory:":
        return None if chosen is None else ":memory:"
    if is_postgres_url(str(chosen)):
        return str(chosen)
    return str(Path(chosen).expanduser().resolve())


def _manager(manifest: Mapping[str, Any], folder: Path) -> ContextManager:
    """The worker's ContextManager: the driver's, rebuilt from the unpacked job."""
    from ..config import agent_apps_home
    from ..manager import ContextManager

    state = manifest["state"] or str(agent_apps_home() / "batch" / manifest["batch"] / f"worker-{os.getpid()}.db")
    return ContextManager(
        search_path=[folder / p for p in manifest["paths"]],
        cwd=folder / "project",
        home=folder / "home",
        env=False,
        project=manifest["project"],
        user=manifest["user"],
        bundled=manifest["bundled"],
        entry_points=manifest["entry_points"],
        max_depth=manifest["max_depth"],
        state=state,
    )


# -- the worker -------------------------------------------------------------------------


@ray.remote
class BatchWorker:
    """One worker process: one ContextManager, several inputs at once."""

    def __init__(self, job: bytes, manifest: dict[str, Any]) -> None:
        self.where = {"node": ray.util.get_node_ip_address(), "pid": os.getpid()}
        self.folder = Path(tempfile.mkdtemp(prefix=f"agent-apps-batch-{manifest['batch']}-"))
        self.error: str | None = None
        try:
            (self.folder / "project").mkdir()
            (self.folder / "home").mkdir()
            with zipfile.ZipFile(io.BytesIO(job)) as zipped:
                zipped.extractall(self.folder)
            self.cm = _manager(manifest, self.folder)
            self.skill = self.cm.get(manifest["skill"])
        except Exception as exc:  # reported by ready(): the driver names the worker
            self.error = f"{type(exc).__name__}: {exc}"

    def ready(self) -> dict[str, Any]:
        return {**self.where, "error": self.error}

    async def run(self, index: int, args: Any, run_options: dict[str, Any] | None) -> dict[str, Any]:
        result = await run_one(self.cm, self.skill, BatchInput(index, args), run_options)
        return {**result.to_json(), "worker": self.where}

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


# -- the driver -------------------------------------------------------------------------


class RayRunner:
    """Starts the workers, feeds them the inputs, streams the results back."""

    def __init__(
        self,
        cm: ContextManager,
        skill: Skill,
        *,
        address: str,
        retries: int,
        run_options: Mapping[str, Any] | None,
    ) -> None:
        self.cm = cm
        self.skill = skill
        self.address = address
        self.retries = retries
        self.run_options = dict(run_options) if run_options else None
        self.batch_id = secrets.token_hex(4)
        self.concurrency = 0
        self.workers = 0
        self._actors: list[Any] = []
        self._started_ray = False

    async def start(self, concurrency: int | None) -> None:
        job, manifest = pack(self.cm, self.skill, self.batch_id)
        self._started_ray = _connect(self.address)
        try:
            cpus = max(int(ray.cluster_resources().get("CPU", 1)), 1)
            self.concurrency = concurrency or RUNS_PER_CPU * cpus
            self.workers = max(1, min(cpus, self.concurrency))
            options = {
                "num_cpus": 1,
                "max_restarts": -1,
                "max_task_retries": self.retries,
                "max_concurrency": math.ceil(self.concurrency / self.workers),
            }
            worker = BatchWorker.options(**options)  # type: ignore[attr-defined]
            self._actors = [worker.remote(job, manifest) for _ in range(self.workers)]
            loop = asyncio.get_running_loop()
            refs = [actor.ready.remote() for actor in self._actors]
            ready, _ = await loop.run_in_executor(
                None, functools.partial(ray.wait, refs, num_returns=len(refs), timeout=START_TIMEOUT)
            )
            if len(ready) < len(refs):
                raise AgentAppsError(
                    f"only {len(ready)} of {len(refs)} Ray workers started within {START_TIMEOUT:.0f} s: "
                    "does the cluster have a free CPU for each? ('ray status' shows what it has)"
                )
            for info in ray.get(refs):
                if info["error"]:
                    raise AgentAppsError(f"the Ray worker on {info['node']} (pid {info['pid']}): {info['error']}")
        except BaseException:
            await self.close()
            raise

    async def results(self, inputs: Iterable[Any] | AsyncIterable[Any]) -> AsyncGenerator[BatchResult, None]:
        """Every input's result, in completion order (see the module docstring)."""
        items = aiter_inputs(inputs)
        load = [0] * len(self._actors)
        pending: dict[Any, tuple[int, BatchInput]] = {}
        loop = asyncio.get_running_loop()
        exhausted = False
        try:
            while True:
                while not exhausted and len(pending) < self.concurrency:
                    try:
                        item = await anext(items)
                    except StopAsyncIteration:
                        exhausted = True
                        break
                    invalid = rejected(item)
                    if invalid is not None:
                        yield invalid
                        continue
                    worker = load.index(min(load))
                    load[worker] += 1
                    pending[self._actors[worker].run.remote(item.index, item.args, self.run_options)] = (worker, item)
                if not pending:
                    return
                ready, rest = await loop.run_in_executor(
                    None, functools.partial(ray.wait, list(pending), num_returns=1, timeout=0.5)
                )
                if ready and rest:  # whatever else has finished meanwhile
                    more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
                    ready += more
                for ref in ready:
                    worker, item = pending.pop(ref)
                    load[worker] -= 1
                    yield self._result(ref, item)
        finally:
            for ref in pending:
                try:
                    ray.cancel(ref)
                except Exception:  # already finished, or its worker is gone
                    pass
            await items.aclose()

    def _result(self, ref: Any, item: BatchInput) -> BatchResult:
        try:
            return BatchResult.from_json(ray.get(ref))
        except ray.exceptions.RayActorError as exc:
            tries = f"{self.retries} {'retry' if self.retries == 1 else 'retries'}"
            message = f"the Ray worker running it died ({tries} spent): {_first_line(exc)}"
            return BatchResult(item.index, False, error={"type": "WorkerDied", "message": message})
        except Exception as exc:  # the result could not come back (it does not pickle, ...)
            return BatchResult(item.index, False, error={"type": type(exc).__name__, "message": _first_line(exc)})

    async def close(self) -> None:
        """Stop the workers (their folders removed), and the cluster if this batch started it."""
        actors, self._actors = self._actors, []
        if actors:
            loop = asyncio.get_running_loop()
            refs = [actor.close.remote() for actor in actors]
            await loop.run_in_executor(None, functools.partial(ray.wait, refs, num_returns=len(refs), timeout=10))
            for actor in actors:
                ray.kill(actor)
        if self._started_ray:
            self._started_ray = False
            ray.shutdown()


def _connect(address: str) -> bool:
    """Connect to Ray unless this process is connected already; True if this started it.

    ``auto``: the cluster this machine belongs to (``RAY_ADDRESS``, or one started with
    ``ray start``), else a new local cluster of this machine's CPUs; anything else is
    the address of a cluster (``HOST:PORT``, ``ray://HOST:PORT``).
    """
    if ray.is_initialized():
        return False
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    handled = faulthandler.is_enabled()
    try:
        ray.init(
            address=None if address == "auto" else address,
            include_dashboard=False,
            log_to_driver=False,
            logging_level=logging.WARNING,
        )
    except (ConnectionError, ValueError, RuntimeError) as exc:
        raise AgentAppsError(f"--ray {address}: could not connect to a Ray cluster: {_first_line(exc)}") from None
    finally:
        if not handled and faulthandler.is_enabled():  # ray.init enabled it, over wasmtime's handlers
            faulthandler.disable()  # which puts those back (see _import_ray)
    return True


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
