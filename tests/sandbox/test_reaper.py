"""Closed sandboxes' stores are deleted on the reaper's thread (``_engine._Reaper``), not
on the event loop's, and every one of them is deleted, at exit too."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

pytestmark = pytest.mark.anyio


@pytest.fixture
def deletions(monkeypatch):
    """Where each store was deleted: its id -> the thread's name."""
    import wasmtime

    where: dict[int, str] = {}
    real = wasmtime.Store._delete

    def recording(self, ptr):
        where[id(self)] = threading.current_thread().name
        real(self, ptr)

    monkeypatch.setattr(wasmtime.Store, "_delete", recording)
    return where


def _wait_for(done: list[str] | dict[int, str], count: int) -> None:
    hang_guard = time.monotonic() + 60
    while len(done) < count and time.monotonic() < hang_guard:
        time.sleep(0.005)


def _watched(deletions: dict[int, str], store: object) -> int:
    """The id of a live ``store``, with any deletion recorded under that id dropped: it
    was an earlier store's (a store of another test, deleted by the garbage collector on
    this thread), whose memory this one reuses, and would be taken for this one's."""
    store_id = id(store)
    deletions.pop(store_id, None)
    return store_id


def _wait_until_deleted(deletions: dict[int, str], store_id: int) -> str | None:
    """Where the store was deleted, once it is (the test waits for it: one store waits
    for the reaper at most, and the next close would free its own). Its id is then
    forgotten: a later store may get the same one."""
    hang_guard = time.monotonic() + 60
    while store_id not in deletions and time.monotonic() < hang_guard:
        time.sleep(0.005)
    return deletions.pop(store_id, None)


async def test_a_closed_sandboxs_store_is_deleted_off_the_event_loops_thread(host, deletions):
    from agent_apps.sandbox import Sandbox, SandboxLimits

    where = []
    for _ in range(3):
        sb = await Sandbox.start(call_host=host)
        store_id = _watched(deletions, sb._core.store)
        assert (await sb.run("1")).value == 1
        await sb.close()
        where.append(_wait_until_deleted(deletions, store_id))
    trapped = await Sandbox.start(limits=SandboxLimits(timeout=0.2), call_host=host)
    store_id = _watched(deletions, trapped._core.store)
    res = await trapped.run("while True:\n    pass")
    assert res.replaced  # the trapped instance's store goes the same way
    where.append(_wait_until_deleted(deletions, store_id))
    store_id = _watched(deletions, trapped._core.store)
    assert (await trapped.run("2")).value == 2
    await trapped.close()
    where.append(_wait_until_deleted(deletions, store_id))
    assert where == ["agent-apps-sandbox-reaper"] * 5


def test_stores_still_queued_at_exit_are_deleted_and_the_process_exits_cleanly(tmp_path):
    script = tmp_path / "close_many.py"
    script.write_text(
        "import asyncio, wasmtime\n"
        "from agent_apps.sandbox import Sandbox\n"
        "deleted = []\n"
        "real = wasmtime.Store._delete\n"
        "def counting(self, ptr):\n"
        "    deleted.append(1)\n"
        "    real(self, ptr)\n"
        "wasmtime.Store._delete = counting\n"
        "async def main():\n"
        "    for _ in range(20):\n"
        "        sb = await Sandbox.start()\n"
        "        await sb.run('1')\n"
        "        await sb.close()\n"
        "asyncio.run(main())\n"
        "from agent_apps.sandbox import _engine\n"
        "_engine._reaper.stop()\n"
        "print(len(deleted))\n"
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "20"


async def test_stores_are_deleted_on_the_closing_thread_when_the_reaper_falls_behind(host, monkeypatch):
    """Each queued store holds its instance's memory: at most MAX_QUEUED wait."""
    import wasmtime

    from agent_apps.sandbox import Sandbox, _engine

    release = threading.Event()
    names: list[str] = []  # where this test's stores were deleted (not those of earlier tests)
    real = wasmtime.Store._delete
    sandboxes = [await Sandbox.start(call_host=host) for _ in range(8)]
    ours = {id(sb._core.store) for sb in sandboxes}

    def held_on_the_reaper(self, ptr):
        if id(self) in ours:
            names.append(threading.current_thread().name)
        if id(self) in ours and threading.current_thread().name == "agent-apps-sandbox-reaper":
            release.wait(60)
        real(self, ptr)

    monkeypatch.setattr(wasmtime.Store, "_delete", held_on_the_reaper)
    try:
        await sandboxes[0].close()
        _wait_for(names, 1)  # the reaper holds the first one
        for sb in sandboxes[1:]:
            await sb.close()
        assert names.count(threading.current_thread().name) == 7 - _engine._Reaper.MAX_QUEUED
    finally:
        release.set()
    _wait_for(names, 8)
    assert len(names) == 8
