"""A batch on a real local Ray cluster (two CPUs, started once for the module): 200
scripted agent runs with a worker killed mid-batch, the command line as a second driver
with the project's config shipped and a shared state store, and what is shipped.

Ray starts slowly (a few seconds, and a second or two per worker): keep these few.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import subprocess
import sys
import zipfile

import pytest

from agent_apps import ContextManager
from agent_apps.state import StateStore
from agent_apps.testing.plugin import hermetic_manager

from .conftest import AGENT, read_lines, write_lines

# Through agent_apps.batch.ray, which imports ray without its crash handler: this process
# runs sandboxes (see _import_ray). Skipped without the ray extra (the test extra has it).
ray = pytest.importorskip("agent_apps.batch.ray", reason="the ray extra").ray

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A local cluster of two CPUs; its workers' agent-apps home is a temporary folder."""
    from agent_apps.sandbox import build

    build()  # compiled once here: the workers find it in the cache
    home = tmp_path_factory.mktemp("ray-home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AGENT_APPS_HOME", str(home))
        patch.setenv("RAY_USAGE_STATS_ENABLED", "0")
        context = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="WARNING")
    try:
        yield {"address": context.address_info["address"], "home": home}
    finally:
        ray.shutdown()


def test_200_agent_runs_a_worker_killed_each_input_one_result(cluster, skills, tmp_path):
    cm = hermetic_manager([skills], tmp_path)  # no explicit store: one per worker
    inputs = [{"text": "w " * (n % 9)} for n in range(200)]
    seen: dict[int, int] = {}
    pids: set[int] = set()
    killed = None

    async def run():
        nonlocal killed
        async with cm.batch("count-agent", inputs, ray="auto", retries=3) as batch:
            await batch.start()
            assert (batch.workers, batch.concurrency) == (2, 8)
            async for result in batch:
                assert result.ok, result.error
                assert result.result == result.index % 9
                seen[result.index] = seen.get(result.index, 0) + 1
                pids.add(result.worker["pid"])
                if len(seen) == 40:  # mid-batch: kill the worker that ran this one
                    killed = result.worker["pid"]
                    os.kill(killed, signal.SIGKILL)

    asyncio.run(run())
    assert seen == dict.fromkeys(range(200), 1)  # every input exactly one result
    assert killed is not None and len(pids) >= 3  # Ray restarted the killed worker, which ran the rest
    stores = sorted((cluster["home"] / "batch").glob("*/worker-*.db"))
    assert len(stores) >= 2  # each worker process its own store
    recorded = [run for path in stores for run in StateStore(path).runs.list(limit=500)]
    assert {run.name for run in recorded} == {"count-agent"} and len(recorded) >= 200


def test_command_line_ships_project_config_and_shares_an_explicit_store(cluster, tmp_path, state_location):
    project = tmp_path / "project"
    (project / "skills").mkdir(parents=True)
    # the model config lives in the project's config file: the workers need it shipped
    (project / "skills" / "count-agent.skill.md").write_text(AGENT.replace("    agent: agent-scripted\n", ""))
    (project / "agent-apps.yaml").write_text("model:\n  agent: agent-scripted\n")
    tasks = write_lines(tmp_path / "tasks.jsonl", [{"text": "a b"}, "{bad", {"text": "c"}, {}])
    out = tmp_path / "results.jsonl"
    shared = state_location  # an SQLite file every worker sees, or a PostgreSQL server
    env = {**os.environ, "AGENT_APPS_STATE": shared, "AGENT_APPS_HOME": str(tmp_path / "home")}
    argv = [sys.executable, "-m", "agent_apps", "batch", "count-agent", "--input", str(tasks), "--output", str(out),
            "--ray", cluster["address"], "--events", "--tenant", "acme"]
    result = subprocess.run(argv, cwd=project, env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 1, result.stderr
    events = [json.loads(line) for line in result.stderr.splitlines() if line.startswith('{"type"')]
    assert events[0]["type"] == "batch-start" and events[0]["workers"] == 2
    by = {line["index"]: line for line in read_lines(out)}
    assert sorted(by) == [0, 1, 2, 3]
    assert (by[0].get("result"), by[2].get("result")) == (2, 1), (by[0], by[2])  # the errors, if any
    assert by[1]["error"]["type"] == "InputInvalid" and "worker" not in by[1]
    assert by[3]["error"]["type"] == "SkillFailed" and by[0]["worker"]["pid"] != os.getpid()
    runs = {run.id for run in StateStore(shared).runs.list(tenant="acme")}
    assert {by[0]["run_id"], by[2]["run_id"]} <= runs  # both workers wrote into the one store, for the tenant
    elsewhere = {**env, "AGENT_APPS_HOME": str(tmp_path / "another-machine")}
    shown = subprocess.run([sys.executable, "-m", "agent_apps", "runs", "show", by[0]["run_id"]], cwd=tmp_path,
                           env=elsewhere, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert shown.returncode == 0 and shown.stdout.startswith(f"run {by[0]['run_id']}: done"), shown.stderr


def test_what_is_shipped_and_its_limit(skills, tmp_path, monkeypatch):
    from agent_apps.batch import ray as on_ray
    from agent_apps.errors import AgentAppsError

    project = tmp_path / "project"
    (project / "skills" / "__pycache__").mkdir(parents=True)
    (project / "skills" / "__pycache__" / "x.pyc").write_bytes(b"0")
    (project / "skills" / "mine.skill.py").write_text("async def main(ctx, args):\n    return 1\n")
    (project / "agent-apps.yaml").write_text("model: {max_turns: 3}\n")
    home = tmp_path / "home"
    (home / "skills").mkdir(parents=True)
    (home / "config.yaml").write_text("model: {max_steps: 4}\n")
    cm = ContextManager([skills], cwd=project, home=home, env=False, entry_points=False, state=tmp_path / "s.db")
    job, manifest = on_ray.pack(cm, cm.get("count"), "b1")
    names = set(zipfile.ZipFile(io.BytesIO(job)).namelist())
    shipped = {"path/0/count.skill.py", "project/skills/mine.skill.py", "project/agent-apps.yaml", "home/config.yaml"}
    assert shipped <= names
    assert not any("__pycache__" in name for name in names)
    assert manifest["paths"] == ["path/0"] and manifest["state"] == str((tmp_path / "s.db").resolve())
    assert (manifest["project"], manifest["user"], manifest["entry_points"]) == (True, True, False)
    url = "postgresql://me:secret@db.example:5432/agents?schema=team"
    for given in (url, StateStore(url)):  # a URL goes as it is: the workers connect with its password
        shared = ContextManager([skills], cwd=project, home=home, env=False, entry_points=False, state=given)
        assert on_ray.pack(shared, shared.get("count"), "b1")[1]["state"] == url
    monkeypatch.setattr(on_ray, "MAX_JOB_BYTES", 100)
    with pytest.raises(AgentAppsError, match=r"more than 100 bytes \(the largest file: .*skill\.(py|md), \d+ bytes\)"):
        on_ray.pack(cm, cm.get("count"), "b2")
    with pytest.raises(AgentAppsError, match="plugins or middleware"):
        on_ray.pack(ContextManager([skills], middleware=[lambda ctx, call_next: call_next()]), cm.get("count"), "b")


#: A second driver on the module's cluster: a sandbox whose code overflows the C stack (a
#: WebAssembly trap, a signal wasmtime's handlers must see first), a batch on Ray (whose
#: import and ray.init install crash handlers of their own), then the same trap again.
TRAP_AROUND_BATCH = """
import asyncio, sys
from agent_apps import ContextManager
from agent_apps.sandbox import Sandbox

async def trap():
    sandbox = await Sandbox.start()
    res = await sandbox.run("import json\\njson.loads('[' * 200000 + ']' * 200000)")
    print(res.error.splitlines()[-1], flush=True)
    await sandbox.close()

async def main():
    await trap()
    cm = ContextManager([sys.argv[1]], env=False, project=False, user=False, entry_points=False, state=":memory:")
    async with cm.batch("count", [{"text": "a b"}], ray=sys.argv[2]) as batch:
        print([r.result async for r in batch], flush=True)
    await trap()

asyncio.run(main())
"""


def test_sandbox_traps_still_work_in_a_process_that_runs_a_ray_batch(cluster, skills, tmp_path):
    result = subprocess.run([sys.executable, "-c", TRAP_AROUND_BATCH, str(skills), cluster["address"]], cwd=tmp_path,
                            capture_output=True, text=True, timeout=240)
    trapped = "RecursionError: the code recursed so deeply that the sandbox's stack overflowed"
    assert result.stdout.splitlines() == [trapped, "[2]", trapped], result.stderr[-2000:]
    assert result.returncode == 0
