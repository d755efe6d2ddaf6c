"""The guest API (CONTRACT section 6) and the host API of the sandbox."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time

import pytest

from agent_apps.sandbox import RunResult, SandboxLimits

pytestmark = pytest.mark.anyio


async def test_last_expression_is_the_value(sb):
    res = await sb.run("x = 20\nx + 22")
    assert res == RunResult(value=42, duration=res.duration)
    assert res.ok and not res.finished and not res.replaced


async def test_print_output_is_returned(sb):
    res = await sb.run("print('hello'); print('world', end='!')")
    assert res.output == "hello\nworld!"
    assert res.value is None


async def test_stderr_is_captured_too(sb):
    res = await sb.run("import sys; sys.stderr.write('oops\\n')")
    assert res.output == "oops\n"


async def test_top_level_await_and_invoke(sb, host):
    res = await sb.run("r = await ctx.manager.invoke('echo', {'a': 1})\nr['a'] + 1")
    assert res.value == 2
    assert res.calls == 1
    assert host.calls == [("echo", {"a": 1})]


async def test_invoke_without_args_sends_none(sb, host):
    await sb.run("await ctx.manager.invoke('echo')")
    assert host.calls == [("echo", None)]


async def test_last_bare_invoke_is_awaited(sb):
    res = await sb.run("ctx.manager.invoke('echo', {'v': 3})")
    assert res.value == {"v": 3}


async def test_gather_runs_host_calls_concurrently(sb, host):
    code = (
        "import time\n"
        "t = time.monotonic()\n"
        "r = await asyncio.gather(*(ctx.manager.invoke('sleep', {'seconds': 0.3}) for _ in range(3)))\n"
        "[r, time.monotonic() - t]"
    )
    t0 = time.monotonic()
    res = await sb.run(code)
    elapsed = time.monotonic() - t0
    assert res.error is None
    assert res.value[0] == ["slept"] * 3
    assert elapsed < 0.75, elapsed  # sequential would take 0.9 s
    assert len(host.calls) == 3


async def test_asyncio_features_work(sb):
    code = (
        "async def one(i):\n"
        "    await asyncio.sleep(0.01)\n"
        "    return await ctx.manager.invoke('add', {'a': i, 'b': 1})\n"
        "async with asyncio.TaskGroup() as tg:\n"
        "    tasks = [tg.create_task(one(i)) for i in range(3)]\n"
        "try:\n"
        "    await asyncio.wait_for(ctx.manager.invoke('sleep', {'seconds': 5}), 0.05)\n"
        "except TimeoutError:\n"
        "    timed_out = True\n"
        "[t.result() for t in tasks] + [timed_out]"
    )
    res = await sb.run(code)
    assert res.error is None, res.error
    assert res.value == [1, 2, 3, True]


async def test_other_tasks_run_while_a_call_is_awaited(sb):
    """An awaited call waits for the host inside the ``await`` only while nothing else
    on the guest's loop could run: a task woken by a timer, or one always ready, still
    runs during the wait."""
    code = (
        "n = {'timer': 0, 'ready': 0}\n"
        "async def on_timer():\n"
        "    while True:\n"
        "        n['timer'] += 1\n"
        "        await asyncio.sleep(0.01)\n"
        "async def always_ready():\n"
        "    while n['ready'] < 10_000:\n"
        "        n['ready'] += 1\n"
        "        await asyncio.sleep(0)\n"
        "t = asyncio.ensure_future(on_timer())\n"
        "await asyncio.sleep(0)\n"
        "await ctx.manager.invoke('sleep', {'seconds': 0.3})\n"
        "ticks = n['timer']\n"
        "r = asyncio.ensure_future(always_ready())\n"
        "await ctx.manager.invoke('sleep', {'seconds': 0.05})\n"
        "t.cancel()\n"
        "[ticks, n['ready']]"
    )
    res = await sb.run(code)
    assert res.error is None, res.error
    ticks, ready = res.value
    assert ticks >= 5, ticks  # ~30 wake-ups of a 10 ms timer during a 0.3 s call
    assert ready > 0


@pytest.mark.parametrize("stop", ["timeout", "interrupt"])
async def test_a_stop_during_an_awaited_call_is_not_agent_codes_to_catch(sb, stop):
    """The host's stop reaches the guest while it waits for a call; agent code that
    catches everything around the ``await`` still runs no further."""
    code = (
        "try:\n"
        "    await ctx.manager.invoke('sleep', {'seconds': 10})\n"
        "except BaseException:\n"
        "    pass\n"
        "memory['after'] = True\n"
        "'not reached'"
    )
    task = asyncio.ensure_future(sb.run(code, timeout=0.3 if stop == "timeout" else None))
    if stop == "interrupt":
        await asyncio.sleep(0.2)
        sb.interrupt()
    res = await task
    assert res.error.startswith("TimeoutError" if stop == "timeout" else "Interrupted"), res.error
    assert res.value is None and not res.replaced
    assert "after" not in (await sb.run("memory")).value


async def test_a_cancelled_call_is_cancelled_on_the_host(sb, host):
    code = (
        "try:\n"
        "    await asyncio.wait_for(ctx.manager.invoke('sleep', {'seconds': 5}), 0.05)\n"
        "except TimeoutError:\n"
        "    pass\n"
        "await ctx.manager.invoke('echo', {'after': 1})"
    )
    t0 = time.monotonic()
    res = await sb.run(code)
    assert res.error is None, res.error
    assert res.value == {"after": 1}
    assert time.monotonic() - t0 < 4  # the 5 s call did not hold the run
    assert host.calls == [("sleep", {"seconds": 5}), ("echo", {"after": 1})]


async def test_a_call_left_from_an_earlier_run_cannot_be_awaited(sb):
    """A run's unawaited calls are cancelled when it ends; awaiting one later is an
    error at once (nothing can complete it), not a wait until the time limit."""
    first = await sb.run("memory['f'] = ctx.manager.invoke('sleep', {'seconds': 5})\nNone")
    assert "still pending" in first.output
    t0 = time.monotonic()
    res = await sb.run("await memory['f']")
    assert res.error is not None and "can never complete" in res.error, res.error
    assert time.monotonic() - t0 < 4


async def test_asyncio_run_habit_works(sb):
    res = await sb.run("async def main():\n    return await ctx.manager.invoke('echo', {'x': 1})\nasyncio.run(main())")
    assert res.value == {"x": 1}


async def test_finish_ends_the_run(sb):
    res = await sb.run("ctx.manager.finish({'count': 3})\nprint('not reached')")
    assert res.finished and res.value == {"count": 3}
    assert res.output == ""


async def test_finish_is_not_swallowed_by_except_exception(sb):
    res = await sb.run("try:\n    ctx.manager.finish(1)\nexcept Exception:\n    print('caught')")
    assert res.finished and res.value == 1 and res.output == ""


async def test_finish_inside_a_gathered_task(sb):
    res = await sb.run(
        "async def f():\n    await asyncio.sleep(0)\n    ctx.manager.finish('from task')\n"
        "await asyncio.gather(f(), ctx.manager.invoke('sleep', {'seconds': 0.01}))"
    )
    assert res.finished and res.value == "from task"


async def test_finish_needs_json(sb):
    res = await sb.run("ctx.manager.finish({1, 2})")
    assert not res.finished
    assert "TypeError: ctx.manager.finish() value must be JSON-serializable" in res.error


async def test_raise_gives_a_trimmed_traceback(sb):
    res = await sb.run("def check(x):\n    raise ValueError('why')\n\ncheck(1)")
    assert res.error.startswith("Traceback (most recent call last):")
    assert 'File "<agent>", line 4, in <module>' in res.error
    assert 'File "<agent>", line 2, in check' in res.error
    assert res.error.rstrip().endswith("ValueError: why")
    # no frames of the guest runtime, asyncio or componentize-py
    for leak in ("sandbox_guest", "asyncio", "_runner", "/python/", "componentize"):
        assert leak not in res.error


async def test_traceback_through_await_is_trimmed(sb):
    res = await sb.run("async def f():\n    await ctx.manager.invoke('fail', {'message': 'boom'})\nawait f()")
    assert "asyncio" not in res.error and "sandbox_guest" not in res.error
    assert 'line 2, in f' in res.error
    assert res.error.endswith("ValueError: boom")


async def test_syntax_error_is_reported(sb):
    res = await sb.run("x = = 1")
    assert "SyntaxError" in res.error and "<agent>" in res.error


async def test_host_errors_arrive_as_named_exceptions(sb):
    code = (
        "try:\n"
        "    await ctx.manager.invoke('not-allowed')\n"
        "except HostError as e:\n"
        "    r = [type(e).__name__, e.type, str(e), isinstance(e, Exception)]\n"
        "r"
    )
    res = await sb.run(code)
    assert res.value[0] == "ToolNotAllowed" and res.value[1] == "ToolNotAllowed"
    assert "not in allowed-tools" in res.value[2] and res.value[3] is True
    res = await sb.run("await ctx.manager.invoke('not-allowed')")
    assert res.error.splitlines()[-1].startswith("ToolNotAllowed: agent may not call not-allowed")


async def test_memory_is_seeded_and_persists(sb):
    assert sb.memory == {"seed": 1}
    res = await sb.run("memory['n'] = memory.get('n', 0) + memory['seed']\nmemory['n']")
    assert res.value == 1
    res = await sb.run("memory['n'] += 1\nmemory['n']")
    assert res.value == 2
    assert sb.memory == {"seed": 1, "n": 2}


async def test_other_globals_do_not_persist(sb):
    await sb.run("x = 1")
    res = await sb.run("x")
    assert "NameError" in res.error


async def test_rebinding_memory_keeps_the_new_dict(sb):
    await sb.run("memory = {'fresh': True}")
    assert sb.memory == {"fresh": True}
    assert (await sb.run("memory")).value == {"fresh": True}


async def test_non_json_memory_values_are_skipped_with_a_note(sb):
    res = await sb.run("memory['ok'] = [1]\nmemory['s'] = {1, 2}\nmemory['f'] = lambda: 1")
    assert "memory['s', 'f']" in res.output or ("'s'" in res.output and "'f'" in res.output)
    assert "not JSON-serializable" in res.output
    assert sb.memory == {"seed": 1, "ok": [1]}
    # still available inside this sandbox
    assert (await sb.run("sorted(memory['s'])")).value == [1, 2]


async def test_non_json_value_is_returned_as_repr(sb):
    assert (await sb.run("{1, 2}")).value == "{1, 2}"


async def test_memory_seed_must_be_json():
    from agent_apps.sandbox import Sandbox

    with pytest.raises(TypeError, match="JSON"):
        await Sandbox.start(memory={"x": {1}})


async def test_unawaited_calls_are_reported(sb, host):
    res = await sb.run("ctx.manager.invoke('echo')\n1")
    assert res.value == 1
    assert "did you forget `await`" in res.output


async def test_non_json_args_fail_on_the_agents_line(sb, host):
    res = await sb.run("await ctx.manager.invoke('echo', {'s': {1, 2}})")
    assert "TypeError: ctx.manager.invoke('echo') args must be JSON-serializable" in res.error
    assert 'File "<agent>", line 1' in res.error
    assert host.calls == []


async def test_non_json_host_result_is_an_error(sb):
    res = await sb.run("await ctx.manager.invoke('weird')")
    assert "ResultInvalid" in res.error and "not JSON" in res.error


async def test_output_is_truncated_with_a_notice(host):
    from agent_apps.sandbox import Sandbox

    s = await Sandbox.start(limits=SandboxLimits(output_kb=1), call_host=host)
    try:
        res = await s.run("for i in range(1000):\n    print('line', i)")
        assert len(res.output) < 1024 + 200
        assert "[output truncated:" in res.output and "output_kb" in res.output
        assert res.output.startswith("line 0\n")
    finally:
        await s.close()


async def test_call_count_limit(host):
    from agent_apps.sandbox import Sandbox

    s = await Sandbox.start(limits=SandboxLimits(max_calls=5), call_host=host)
    try:
        res = await s.run("for i in range(10):\n    await ctx.manager.invoke('echo')")
        assert "LimitExceeded: too many ctx.manager.invoke() calls in one run (limit 5, max_calls)" in res.error
        assert len(host.calls) == 5
        res = await s.run("await ctx.manager.invoke('echo', {'again': True})")  # the count is per run
        assert res.ok
    finally:
        await s.close()


async def test_recursion_limit_is_configurable(host):
    from agent_apps.sandbox import Sandbox

    s = await Sandbox.start(limits=SandboxLimits(max_recursion=100), call_host=host)
    try:
        code = "def f(n):\n    return 0 if n == 0 else 1 + f(n - 1)\nf(%d)"
        assert (await s.run(code % 80)).value == 80
        res = await s.run(code % 200)
        assert res.error.splitlines()[-1].startswith("RecursionError")
        assert not res.replaced
    finally:
        await s.close()


async def test_timeout_while_computing_resets_and_restores_memory(host):
    from agent_apps.sandbox import Sandbox

    s = await Sandbox.start(memory={"a": 1}, limits=SandboxLimits(timeout=0.5), call_host=host)
    try:
        await s.run("memory['b'] = 2")
        res = await s.run("memory['c'] = 3\nwhile True:\n    pass")
        assert res.replaced
        assert res.error.startswith("TimeoutError: the code ran longer than its time limit of 0.5 s")
        assert "reset" in res.notice and "memory restored" in res.notice
        assert (await s.run("memory")).value == {"a": 1, "b": 2}
    finally:
        await s.close()


async def test_timeout_while_awaiting_does_not_reset(sb):
    res = await sb.run("await ctx.manager.invoke('sleep', {'seconds': 10})", timeout=0.3)
    assert res.error.startswith("TimeoutError") and not res.replaced
    assert (await sb.run("memory['seed']")).value == 1


async def test_per_run_timeout_override(sb):
    res = await sb.run("import time\nwhile True: pass", timeout=0.2)
    assert res.replaced and "0.2 s" in res.error


async def test_interrupt_stops_running_code(sb):
    task = asyncio.ensure_future(sb.run("while True:\n    pass"))
    await asyncio.sleep(0.2)
    sb.interrupt()
    res = await task
    assert res.replaced and res.error.startswith("Interrupted")
    assert (await sb.run("1")).value == 1


async def test_cancelling_the_awaiting_task_stops_the_guest(sb):
    threads = threading.active_count()
    task = asyncio.ensure_future(sb.run("while True:\n    pass"))
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (await sb.run("2")).value == 2
    assert threading.active_count() <= threads


async def test_cancelling_while_awaiting_host_calls(sb, host):
    task = asyncio.ensure_future(sb.run("await ctx.manager.invoke('sleep', {'seconds': 30})"))
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (await sb.run("3")).value == 3


async def test_event_loop_is_not_blocked_by_a_runaway_guest(sb):
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    t = asyncio.ensure_future(ticker())
    await sb.run("while True: pass", timeout=0.5)
    t.cancel()
    assert ticks >= 5  # the loop kept running while the guest spun


async def test_runs_on_one_sandbox_are_serialized(sb):
    a, b = await asyncio.gather(sb.run("memory['x'] = 1\n1"), sb.run("memory.get('x')"))
    assert a.value == 1 and b.value == 1


async def test_close_is_idempotent_and_final(host):
    from agent_apps.sandbox import Sandbox

    s = await Sandbox.start(call_host=host)
    await s.close()
    await s.close()
    assert s.closed
    with pytest.raises(RuntimeError, match="closed"):
        await s.run("1")


async def test_close_while_running_stops_the_guest_first(host):
    from agent_apps.sandbox import Sandbox

    s = await Sandbox.start(call_host=host)
    task = asyncio.ensure_future(s.run("while True: pass"))
    await asyncio.sleep(0.1)
    await s.close()
    res = await task
    assert res.error.startswith("Interrupted")


async def test_no_call_host(host):
    from agent_apps.sandbox import Sandbox

    s = await Sandbox.start()
    try:
        res = await s.run("await ctx.manager.invoke('echo')")
        assert "SandboxError: this sandbox has no host functions" in res.error
    finally:
        await s.close()


async def test_deadlock_is_reported(sb):
    res = await sb.run("await asyncio.get_running_loop().create_future()")
    assert "can never complete" in res.error


async def test_pool_gives_ready_sandboxes(host):
    from agent_apps.sandbox import SandboxPool

    async with SandboxPool(size=2) as pool:
        await pool.wait_ready()
        a = await pool.acquire(memory={"who": "a"}, call_host=host)
        b = await pool.acquire(memory={"who": "b"}, limits=SandboxLimits(output_kb=2), call_host=host)
        c = await pool.acquire(memory={"who": "c"})  # pool empty: the one the thread makes now
        try:
            assert [(await x.run("memory['who']")).value for x in (a, b, c)] == ["a", "b", "c"]
            assert b.limits.output_kb == 2
            assert (await a.run("await ctx.manager.invoke('echo', {'k': 1})")).value == {"k": 1}
        finally:
            for x in (a, b, c):
                await x.close()


def test_a_pool_refills_after_the_event_loop_that_took_from_it_closed():
    """The refill is the pool's own thread's: a caller that closes its loop right after
    its call (``cm.invoke_sync``) leaves the pool full for the next one."""
    from agent_apps.sandbox import SandboxPool

    pool = SandboxPool(size=1)

    async def take() -> None:
        await pool.wait_ready()
        sb = await pool.acquire()
        assert (await sb.run("1")).value == 1
        await sb.close()

    try:
        asyncio.run(take())
        hang_guard = time.monotonic() + 60
        while pool.ready < 1 and time.monotonic() < hang_guard:  # no event loop runs here
            time.sleep(0.01)
        assert pool.ready == 1
        asyncio.run(take())
        assert (pool.stats.pooled, pool.stats.fresh) == (2, 0)
    finally:
        asyncio.run(pool.close())


async def test_an_acquire_on_an_empty_pool_waits_for_the_instance_in_the_making():
    from agent_apps.sandbox import SandboxPool

    async with SandboxPool(size=1) as pool:
        await pool.wait_ready()
        first = await pool.acquire()
        second = await pool.acquire(memory={"n": 2})  # empty: the thread makes it now
        try:
            assert (await second.run("memory['n']")).value == 2
            assert (pool.stats.pooled, pool.stats.fresh, pool.stats.made) == (2, 0, 2)
        finally:
            for sb in (first, second):
                await sb.close()


async def test_a_cancelled_acquire_leaves_the_instance_it_waited_for_in_the_pool():
    from agent_apps.sandbox import SandboxPool

    async with SandboxPool(size=1) as pool:
        await pool.wait_ready()
        first = await pool.acquire()
        waiting = asyncio.ensure_future(pool.acquire())
        await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        await pool.wait_ready()
        # and no third is made for it: wait until the pool's thread has nothing to do
        for _ in range(1000):
            if not pool._making and pool._due is None:
                break
            await asyncio.sleep(0.01)
        assert pool.stats.made == 2 and pool.ready == 1
        await first.close()
        sb = await pool.acquire()
        assert (await sb.run("1")).value == 1
        await sb.close()
        assert (pool.stats.pooled, pool.stats.fresh) == (2, 0)


async def test_an_acquire_cancelled_as_its_instance_arrives_leaves_it_in_the_pool():
    from agent_apps.sandbox import SandboxPool

    async with SandboxPool(size=1) as pool:
        await pool.wait_ready()
        first = await pool.acquire()
        waiting = asyncio.ensure_future(pool.acquire())
        await asyncio.sleep(0)  # it waits for the instance in the making
        pool.size = 0  # no refill after that one, so the pool holds only what comes back
        hang_guard = time.monotonic() + 60
        while pool.stats.made < 2 and time.monotonic() < hang_guard:
            time.sleep(0.01)  # the loop is blocked: the delivery waits in its queue
        await asyncio.sleep(0)  # the delivery runs; the acquire has not resumed yet
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert pool.ready == 1
        await first.close()


async def test_a_pool_of_size_zero_makes_each_instance_on_demand_and_starts_no_thread():
    from agent_apps.sandbox import SandboxPool

    before = {t.ident for t in threading.enumerate()}
    async with SandboxPool(size=0) as pool:
        sb = await pool.acquire()
        assert (await sb.run("1")).value == 1
        await sb.close()
        assert (pool.stats.pooled, pool.stats.fresh, pool.stats.made) == (0, 1, 0)
    assert not [t for t in threading.enumerate() if t.ident not in before and t.name == "agent-apps-sandbox-pool"]


async def test_the_store_is_told_of_a_memory_limit_only_when_it_changes(host, monkeypatch):
    """A pooled sandbox's first run re-applies no limit its instance already has (a
    wasmtime call in every first result); a changed memory limit is applied, and holds."""
    import wasmtime

    from agent_apps.sandbox import SandboxPool

    applied: list[int] = []
    real = wasmtime.Store.set_limits

    def counting(self, *args, **kwargs):
        if threading.current_thread() is threading.main_thread():  # not the pool's refills
            applied.append(kwargs.get("memory_size"))
        return real(self, *args, **kwargs)

    async with SandboxPool(size=3) as pool:
        await pool.wait_ready()
        monkeypatch.setattr(wasmtime.Store, "set_limits", counting)
        same = await pool.acquire(limits=SandboxLimits(timeout=5))  # the same memory limit
        default = await pool.acquire()
        smaller = await pool.acquire(limits=SandboxLimits(memory_mb=96))
        try:
            for sb in (same, default, smaller):
                assert (await sb.run("1")).value == 1
            assert applied == [96 << 20]
            assert (await smaller.run("x = bytearray(128 << 20)")).error.endswith("MemoryError")
            assert (await same.run("x = bytearray(128 << 20)\nlen(x)")).value == 128 << 20
        finally:
            for sb in (same, default, smaller):
                await sb.close()


def test_limits_validation():
    with pytest.raises(ValueError, match="timeout"):
        SandboxLimits(timeout=0)
    with pytest.raises(ValueError, match="memory_mb"):
        SandboxLimits(memory_mb=8)
    assert SandboxLimits.from_config({"timeout": 5, "memory_mb": 128}).timeout == 5
    with pytest.raises(ValueError, match="unknown sandbox limit"):
        SandboxLimits.from_config({"timout": 5})


def test_run_result_for_model():
    assert RunResult(output="hi\n", value=3).for_model() == "hi\n3"
    assert RunResult(value={"a": 1}, finished=True).for_model() == 'finished with: {"a": 1}'
    text = RunResult(error="ValueError: x", replaced=True, notice="the sandbox was reset").for_model()
    assert text == "ValueError: x\n[the sandbox was reset]"


def test_importing_the_package_does_not_import_wasmtime():
    code = "import sys, agent_apps.sandbox as s; s.SandboxLimits(); print('wasmtime' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(
    "code, value",
    [
        ("x = [\n1,\n2]\nx", [1, 2]),
        ("y = (1 +\n2)", None),
        ("(1 +\n2)", 3),
        ("s = '''\nabc\n'''\ns", "\nabc\n"),
        ("for i in range(3):\n    pass\ni", 2),
        ("for i in range(3):\n    i", None),
        ("if True:\n    v = 1\nelse:\n    v = 2\nv", 1),
        ("def f():\n    return 5\n\nf()  # comment\n\n", 5),
        ("1\n# trailing comment", 1),
        ("import math\nmath.floor(2.5)", 2),
        ("x = 1 + \\\n2\nx", 3),
        ("(1\nif True else 0)", 1),
        ("from_x = 4\nfrom_x", 4),
        ("@staticmethod\ndef g():\n    pass", None),
        ("", None),
        ("# only a comment", None),
        ("async def f():\n    return 7\nawait f()", 7),
        ("x = await ctx.manager.invoke('echo', {'a': 1})\nx['a']", 1),
        ("x = 1\ny = x + 1", None),
        ("x = 1\nx; y = 2", None),
        ("x = 1; x + 1", 2),
        ("x = 1\ny = 2; x", 1),
        ("s = 'a;b'\ns", "a;b"),
        ("s = 'a;b'", None),
        ("f = print\nf(1,\n2)", None),
        ("f = max\nf(1,\n2)", 2),
        ("t = '''\nu = 1\n'''\nt", "\nu = 1\n"),
        ("t = '''\nu = 1\n'''", None),
        ("t = '''\nu = 1'''\nu = 2", None),
        ("d = {}\nd['k'] = 3\nd", {"k": 3}),
        ("n = 1\nn += 2\nn", 3),
        ("memory['x'] = 1\nassert memory['x'] == 1", None),
    ],
)
async def test_last_expression_detection(sb, code, value):
    res = await sb.run(code)
    assert res.error is None, res.error
    assert res.value == value


@pytest.mark.parametrize("code, line", [("x = 1\n\n1/0", 3), ("a = 1\nb = 2\nundefined_name", 3), ("1/0\nx = 2", 1)])
async def test_error_line_numbers(sb, code, line):
    res = await sb.run(code)
    assert f'File "<agent>", line {line}, in <module>' in res.error


def test_process_exits_cleanly_with_guests_still_running(tmp_path):
    script = tmp_path / "exit.py"
    script.write_text(
        "import asyncio\nfrom agent_apps.sandbox import Sandbox, SandboxPool\n"
        "async def main():\n"
        "    sb = await Sandbox.start()\n"
        "    waiting = await Sandbox.start()\n"
        "    pool = SandboxPool(size=2)\n"
        "    asyncio.ensure_future(sb.run('while True: pass'))\n"
        "    asyncio.ensure_future(waiting.run('import asyncio\\nawait asyncio.sleep(30)'))\n"
        "    await asyncio.sleep(0.2)\n"
        "asyncio.run(main())\n"
        "loop = asyncio.new_event_loop()  # a loop that stops with a guest mid-run\n"
        "sb = loop.run_until_complete(Sandbox.start())\n"
        "loop.create_task(sb.run('while True: pass', timeout=30))\n"
        "loop.run_until_complete(asyncio.sleep(0.2))\n"
        "print('exiting')\n"
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "exiting"


async def test_time_sleep_counts_against_the_time_limit(sb):
    res = await sb.run("import time\ntime.sleep(30)", timeout=0.3)
    assert res.error.startswith("TimeoutError") and not res.replaced
    assert (await sb.run("import time\ntime.sleep(0.01)\n'ok'")).value == "ok"


async def test_interrupt_reaches_a_sleeping_guest(sb):
    task = asyncio.ensure_future(sb.run("import time\ntime.sleep(30)"))
    await asyncio.sleep(0.2)
    sb.interrupt()
    res = await task
    assert res.error.startswith("Interrupted")


ORIGINAL_SELECT = (  # WASI's own select, dug out of the guest runtime past its rerouting
    "import sys\ndel sys.modules['select']\nimport select as sel\n"
)


async def test_a_wasi_wait_is_refused_and_the_sandbox_carries_on(host):
    """A wait the guest runtime does not route through the host (here: the original
    select, rebuilt from its module spec) would block the host's thread, where epochs
    cannot reach: WASI's clock refuses it, the sandbox is reset, memory is kept."""
    from agent_apps.sandbox import Sandbox

    s = await Sandbox.start(memory={"kept": True}, limits=SandboxLimits(timeout=5), call_host=host)
    try:
        res = await s.run(ORIGINAL_SELECT + "sel.select([], [], [], 3)")
        assert res.replaced and "waited on WASI's clock directly" in res.error, res
        assert (await s.run("memory")).value == {"kept": True}
    finally:
        await s.close()


async def test_text_crosses_the_boundary_intact(sb, host):
    """The run export and the poll import are marshalled by hand (strings only, see
    ``_engine.StringCall`` and ``_engine.PollAnswer``): non-ASCII, NUL, empty and large text arrive unchanged
    both ways, in code, call args, results, output, values and memory."""
    text = "héllo wörld ✓ 𝄞 日本語 \x00 end"
    code = f"r = await ctx.manager.invoke('echo', {{'t': {text!r}, 'e': ''}})\nprint(r['t'])\nmemory['t'] = r['t']\nr"
    res = await sb.run(code)
    assert res.error is None, res.error
    assert res.value == {"t": text, "e": ""}
    assert res.output == text + "\n"
    assert sb.memory["t"] == text
    assert host.calls == [("echo", {"t": text, "e": ""})]
    res = await sb.run("r = await ctx.manager.invoke('big', {'size': 500000})\nlen(r), r[:2]")
    assert res.value == [500000, "xx"]
    res = await sb.run("'é' * 100000")
    assert res.value == "é" * 100000
    res = await sb.run("")
    assert res.error is None and res.value is None and res.output == ""
