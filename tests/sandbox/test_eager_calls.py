"""A host call's first step runs at once, in the call's own task (sandbox/_calls.py).

A quick call is answered in the guest's same wait; whatever a call does with "the
current task" (timeouts, cancellation scopes) targets the call's task, never the
driver's; its context variables, a KeyboardInterrupt it raises, and a cancel that
reaches it behave as when every call started in a task of its own.
"""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

import pytest

from agent_apps.sandbox import Sandbox, SandboxLimits

VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="unset")


class Rounds:
    """Counts the event loop's rounds: a callback that schedules itself again."""

    def __init__(self) -> None:
        self.count = 0
        self._loop = asyncio.get_running_loop()
        self._handle = self._loop.call_soon(self._tick)

    def _tick(self) -> None:
        self.count += 1
        self._handle = self._loop.call_soon(self._tick)

    def stop(self) -> int:
        self._handle.cancel()
        return self.count


@pytest.mark.anyio
async def test_quick_calls_are_answered_without_a_round_of_the_event_loop(host):
    """300 calls of a skill that never suspends: the loop turns only at the guest's
    epoch ticks (three rounds a tick), not once per call as a task per call made it."""
    s = await Sandbox.start(limits=SandboxLimits(timeout=30, max_calls=500), call_host=host)
    try:
        rounds = Rounds()
        res = await s.run("for i in range(300):\n    assert (await ctx.manager.invoke('echo', {'i': i}))['i'] == i\ni")
        count = rounds.stop()
    finally:
        await s.close()
    assert res.error is None and res.value == 299, res.error
    assert len(host.calls) == 300
    assert count < 150, count


@pytest.mark.anyio
async def test_a_call_is_its_own_current_task_from_its_first_step_on():
    seen: list[Any] = []

    async def call_host(name: str, args: Any) -> Any:
        first = asyncio.current_task()
        assert "GuestCalls._one()" in repr(first)  # the task's repr names the call's coroutine
        await asyncio.sleep(0)
        seen.append((first, asyncio.current_task()))
        return 1

    s = await Sandbox.start(limits=SandboxLimits(timeout=10), call_host=call_host)
    try:
        driver = asyncio.ensure_future(s.run("[await ctx.manager.invoke('a', {}), await ctx.manager.invoke('b', {})]"))
        res = await driver
    finally:
        await s.close()
    assert res.value == [1, 1], res.error
    assert len(seen) == 2
    for first, later in seen:
        assert first is later and first is not driver and first is not None
    assert seen[0][0] is not seen[1][0]


@pytest.mark.anyio
async def test_a_timeout_opened_in_a_calls_first_step_cancels_that_call_only():
    """``asyncio.timeout`` captures the current task when it is entered: in a call's
    first step that is the call's task, so its expiry ends the call, not the run."""

    async def call_host(name: str, args: Any) -> Any:
        if name == "slow":
            async with asyncio.timeout(0.05):
                await asyncio.sleep(30)
        return name

    s = await Sandbox.start(limits=SandboxLimits(timeout=20), call_host=call_host)
    try:
        res = await s.run(
            "try:\n"
            "    await ctx.manager.invoke('slow', {})\n"
            "except Exception as e:\n"
            "    caught = type(e).__name__\n"
            "[caught, await ctx.manager.invoke('after', {})]"
        )
    finally:
        await s.close()
    assert res.error is None, res.error
    assert res.value == ["TimeoutError", "after"]


@pytest.mark.anyio
async def test_a_calls_context_variables_are_its_own():
    """A call sees the context of the code that started the run, keeps what it sets
    across its first suspension, and sets nothing in the run's context or another
    call's."""
    seen: list[tuple[str, str]] = []

    async def call_host(name: str, args: Any) -> Any:
        before = VAR.get()
        VAR.set(name)
        await asyncio.sleep(0)
        seen.append((before, VAR.get()))
        return VAR.get()

    s = await Sandbox.start(limits=SandboxLimits(timeout=10), call_host=call_host)
    token = VAR.set("caller")
    try:
        res = await s.run(
            "[await ctx.manager.invoke('a', {}), await ctx.manager.invoke('b', {}), "
            "*await asyncio.gather(ctx.manager.invoke('c', {}), ctx.manager.invoke('d', {}))]"
        )
        assert VAR.get() == "caller"
    finally:
        VAR.reset(token)
        await s.close()
    assert res.value == ["a", "b", "c", "d"], res.error
    assert seen == [("caller", "a"), ("caller", "b"), ("caller", "c"), ("caller", "d")]


def test_a_keyboard_interrupt_in_a_calls_first_step_stops_the_loop_before_the_guest_goes_on():
    """As from a call's task: the interrupt leaves the event loop, and the guest is not
    answered first (it makes no further call)."""
    names: list[str] = []

    async def call_host(name: str, args: Any) -> Any:
        names.append(name)
        if name == "interrupt":
            raise KeyboardInterrupt
        return 1

    loop = asyncio.new_event_loop()
    try:
        s = loop.run_until_complete(Sandbox.start(limits=SandboxLimits(timeout=10), call_host=call_host))
        run = loop.create_task(s.run(
            "try:\n"
            "    await ctx.manager.invoke('interrupt', {})\n"
            "except BaseException:\n"
            "    pass\n"
            "await ctx.manager.invoke('after', {})"
        ))
        with pytest.raises(KeyboardInterrupt):
            loop.run_until_complete(run)
        assert names == ["interrupt"]
        run.cancel()  # the run goes on once the loop does: cancelled, it stops its guest
        with pytest.raises(asyncio.CancelledError):
            loop.run_until_complete(run)
        loop.run_until_complete(s.close())
    finally:
        loop.close()
    assert names == ["interrupt"]


def waiting_host(reached: list[str], started: asyncio.Event | None = None) -> Any:
    """A ``call_host`` whose calls wait until cancelled, then note their name in ``reached``."""

    async def call_host(name: str, args: Any) -> Any:
        if started is not None:
            started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            reached.append(name)
            raise
        return 1

    return call_host


@pytest.mark.anyio
async def test_cancelling_the_run_reaches_a_call_suspended_in_its_first_step():
    reached: list[str] = []
    started = asyncio.Event()
    s = await Sandbox.start(limits=SandboxLimits(timeout=20), call_host=waiting_host(reached, started))
    try:
        run = asyncio.ensure_future(s.run("await ctx.manager.invoke('waits', {})"))
        await started.wait()
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        for _ in range(20):  # the call's task hears of it in a later round
            if reached:
                break
            await asyncio.sleep(0.01)
        assert (await s.run("3")).value == 3
    finally:
        await s.close()
    assert reached == ["waits"]


@pytest.mark.anyio
async def test_a_call_the_guest_cancels_before_its_task_ran_is_cancelled_on_the_host():
    """The guest cancels a call in the wait right after it started it: the call's task
    has not taken its own first step yet, and the cancel still reaches the call."""
    reached: list[str] = []
    s = await Sandbox.start(limits=SandboxLimits(timeout=20), call_host=waiting_host(reached))
    try:
        res = await s.run(
            "t = asyncio.ensure_future(ctx.manager.invoke('waits', {}))\n"
            "await asyncio.sleep(0)\n"
            "t.cancel()\n"
            "await asyncio.sleep(0.05)\n"
            "t.cancelled()"
        )
    finally:
        await s.close()
    assert res.value is True, res.error
    assert reached == ["waits"]


@pytest.mark.anyio
async def test_a_call_that_runs_another_sandbox_in_its_first_step_leaves_the_guest_driven(host):
    """A call may run code in another sandbox before it first suspends (inside the
    guest's wait): the guest's next waits still reach its own sandbox."""
    inner = await Sandbox.start(limits=SandboxLimits(timeout=10), call_host=host)

    async def call_host(name: str, args: Any) -> Any:
        return (await inner.run("20 + 1")).value

    s = await Sandbox.start(limits=SandboxLimits(timeout=10), call_host=call_host)
    try:
        res = await s.run("[await ctx.manager.invoke('inner', {}) for _ in range(3)]")
    finally:
        await s.close()
        await inner.close()
    assert res.error is None, res.error
    assert res.value == [21, 21, 21]


DEEP_FIRST_STEP = """
import asyncio, sys
from agent_apps.sandbox import Sandbox, SandboxLimits
sys.setrecursionlimit(5000)
class Deep:
    def __getattr__(self, name):  # each level goes through C (the attribute slot) again
        return getattr(Deep(), name)
async def call_host(name, args):
    try:
        Deep().x
    except RecursionError:
        return "RecursionError"
async def main():
    s = await Sandbox.start(limits=SandboxLimits(timeout=10), call_host=call_host)
    print((await s.run("await ctx.manager.invoke('deep', {})")).value)
    await s.close()
asyncio.run(main())
"""


def test_a_calls_first_step_has_a_threads_stack_on_the_guests_fiber():
    """The first step runs on the guest's fiber: recursion through C up to a raised
    recursion limit (5,000) ends in RecursionError, not in a crash of the process
    (wasmtime's default fiber stack, 2 MiB, overflowed at ~3,000)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", DEEP_FIRST_STEP], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "RecursionError"
