"""One sandbox's wasm side: a Store, an instance, and the driver of its runs.

A run is an async wasm call (``_engine.StringCall``) driven on the event loop's
own thread: wasmtime runs the guest on a fiber and hands the thread back at every
epoch tick (each ``TICK``, so a guest computing for seconds delays the loop's other
tasks by one tick at most) and whenever the guest waits in the ``poll`` import.
Host calls then run as tasks on the same loop, and their completion resumes the
guest, with no thread in between: a call costs no thread wake-up.

Nothing the guest does can block the thread: the guest runtime's waits all go
through ``poll``, and WASI's own clock waits trap (see ``_engine``).

A trap (time limit, out of memory, stack overflow, runtime crash) poisons a
component instance; the core then drops it and instantiates a fresh one,
seeded with the last JSON snapshot of ``memory``.

What the guest asks of the host while it waits is judged and run in ``_calls``; the
report it ends a run with is judged in ``_report``.
"""

from __future__ import annotations

import asyncio
import atexit
import ctypes
import time
import weakref
from typing import Any

import wasmtime

from . import _engine
from ._calls import GuestCalls
from ._limits import DEFAULT_LIMITS
from ._report import read_report

NO_TIMER = 4294967295
WARM_UP_CODE = """\
import asyncio
await asyncio.sleep(0)
try:
    raise ValueError("warm-up")
except ValueError:
    pass
print("", end="")
memory
"""
#: After the host tells a guest that waits in ``poll`` to stop, the guest gets
#: this long to unwind and report before the epoch callback traps it.
STOP_GRACE = 0.5
#: After a slice that ended at an epoch tick, the guest waits this many rounds of the
#: event loop: a timer that came due during the slice wakes its future in the first
#: round, the task awaiting it is queued behind the driver's own step in the second
#: and runs in the third. So a task woken by a timer waits one slice (one TICK), not three.
YIELD_ROUNDS = 3

_live_cores: weakref.WeakSet[Core] = weakref.WeakSet()


class Trapped(Exception):
    """The guest trapped; ``reason`` says why in words for the model."""

    def __init__(self, reason: str, error: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.error = error


class Core:
    """The wasm side of one sandbox: its Store and instance (a fresh one after a trap),
    its limits and stop flag, and the driver of its runs (see the module docstring)."""

    def __init__(self) -> None:
        self.runtime = _engine.runtime()
        self.limits = DEFAULT_LIMITS
        self._memory_applied = 0          # the store's memory limit (MB), the one limit it holds
        self.memory_json = "{}"          # last saved JSON state of `memory`
        self.loop: asyncio.AbstractEventLoop | None = None
        #: the guest's host calls (_calls.py)
        self.calls = GuestCalls(self)
        self.target_json: str | None = None  # the served call, in middleware mode
        # What the guest holds, so a run's setup carries only what it lacks (see _setup)
        self._seed = False               # the next run seeds `memory` (and target) from memory_json
        self._guest_limits: tuple[int, int, int] | None = None  # output_kb, max_recursion, max_payload_kb
        self._guest_clock = False        # the guest's clock is fixed (the last setup gave it one)
        self._pristine = False           # the guest's memory is {} and it serves no call (no run since)
        # per-run state
        self._stop: str | None = None    # message when the host wants the run stopped
        self._trap_at = 0.0              # when a stopped guest still running gets trapped
        self._deadline = 0.0
        self._timeout = 0.0
        self._running = False
        # the guest's wait in `poll`: where the answer goes, until when it waits
        self._answer: _engine.PollAnswer | None = None
        self._wait_until: float | None = None
        self._wake: asyncio.Future[None] | None = None
        self._limit_timer: asyncio.TimerHandle | None = None
        self._ticked = False             # the last slice ended at an epoch tick
        # the wasm side
        self.store: wasmtime.Store | None = None
        self._run_func: Any = None
        self._store_context = 0          # the address of the store's context
        self._call: _engine.StringCall | None = None  # the run in progress
        self.closed = False
        _live_cores.add(self)

    # -- instance lifecycle ---------------------------------------------------------

    def instantiate(self) -> None:
        """A new Store and instance (~1 ms of wasm, on the calling thread)."""
        runtime = self.runtime
        store = wasmtime.Store(runtime.engine)
        store.set_wasi(wasmtime.WasiConfig())  # no preopens, no env, no args, no stdio
        self._apply_limits(store)
        _engine.watch_deadline(store, self._check_deadline)
        store.set_epoch_deadline(1)
        self._stop = None
        self._deadline = time.monotonic() + 60.0  # instantiation runs guest init code: bound it too
        call, raw = _engine.start_instantiate(runtime, store)
        runtime.ticker.acquire()
        try:
            _engine.driving(self)
            while not call.poll():
                pass  # an epoch tick: instantiation is our code, it ends on its own
            call.check()
        finally:
            call.close()
            runtime.ticker.release()
        self._run_func = _engine.export_func(store, raw, "run")
        self._store_context = _engine.context_address(store)
        self.store = store
        self._guest_limits = None  # the runtime's own defaults: sent at the first run
        self._guest_clock = False
        self._pristine = True  # the runtime was reset when its snapshot was taken

    def warm_up(self) -> None:
        """Run a throwaway snippet so the pages CPython touches on a first run are
        already faulted in (copy-on-write of the snapshot); pools do this before
        handing an instance out, which makes its first result ~10x faster."""
        self.seed('{"warm": [1, "up"]}', None)  # exercise the seeding path too
        self.run_sync(WARM_UP_CODE, 10.0)
        self.seed("{}", None)
        self.run_sync("1", 10.0)
        self._pristine = True  # seeded with {}, and "1" changes nothing

    def _apply_limits(self, store: wasmtime.Store) -> None:
        store.set_limits(memory_size=self.limits.memory_mb * 1024 * 1024, instances=100, tables=100, memories=10)
        self._memory_applied = self.limits.memory_mb

    def _drop_instance(self) -> None:
        if self._call is not None:  # a store must outlive the call in it; the run drops it
            return
        self._run_func = None
        store, self.store = self.store, None
        if store is not None:
            _engine.discard(store)  # deleted on the reaper's thread, not the event loop's

    def close(self) -> None:
        """Stop any running code and free the instance (once the run has ended)."""
        if not self.closed:
            self.closed = True
            self.interrupt("the sandbox was closed")
            self._drop_instance()

    # -- limits --------------------------------------------------------------------------

    def _check_deadline(self) -> str | None:
        """Called on every epoch tick while wasm runs; a string traps the guest,
        None lets it yield (the driver resumes it after the loop's other work)."""
        now = time.monotonic()
        if self._stop is None:
            if now < self._deadline:
                self._ticked = True
                return None
            self._set_stop(self._timeout_message(), grace=False)
        if now >= self._trap_at:
            return self._stop
        self._ticked = True
        return None

    def _set_stop(self, message: str, grace: bool) -> None:
        """Record that the run must stop. A guest waiting in ``poll`` gets a grace
        period to unwind cleanly (no trap, no reset); one running code is trapped."""
        self._stop = message
        self._trap_at = time.monotonic() + (STOP_GRACE if grace else 0.0)
        self.wake_up()

    def _timeout_message(self) -> str:
        return (
            f"TimeoutError: the code ran longer than its time limit of {self._timeout:g} s "
            "(timeout) and was stopped"
        )

    def interrupt(self, message: str = "the run was interrupted") -> None:
        """Stop the running guest (from any thread): at the next epoch tick, or at
        once if it is waiting for host calls."""
        if self._running and self._stop is None:
            loop = self.loop
            if loop is not None and not loop.is_closed():
                try:
                    loop.call_soon_threadsafe(self._interrupt_now, message)
                    return
                except RuntimeError:  # the loop closed in between
                    pass
            self._interrupt_now(message)

    def _interrupt_now(self, message: str) -> None:
        if self._running and self._stop is None:
            self._set_stop(f"Interrupted: {message}", grace=self._answer is not None)

    def wake_up(self) -> None:
        """The guest's wait may be over: resume the driver (a call ended, a stop)."""
        wake = self._wake
        if wake is not None and not wake.done():
            try:
                wake.set_result(None)
            except RuntimeError:  # set from another thread as the loop closed
                pass

    # -- the run ---------------------------------------------------------------------------

    def _begin(self, code: str, timeout: float, clock: str | None, batch: str | None) -> _engine.StringCall | None:
        """Set up a run and start its wasm call (None: the sandbox is closed)."""
        if not self.closed and self.store is None:
            self.instantiate()
        store = self.store
        if self.closed or store is None:
            return None
        self._stop = None
        self._answer = None
        self._running = True
        if self.limits.memory_mb != self._memory_applied:  # the store is told only of a change
            self._apply_limits(store)
        setup = self._setup(clock)
        if batch is not None:
            setup = batch if not setup else setup[:-1] + "," + batch[1:]  # two JSON objects, one
        self.calls.begin()
        self._timeout = timeout
        self._deadline = time.monotonic() + timeout
        self.runtime.ticker.acquire()
        _engine.set_epoch_deadline(self._store_context, 1)
        self._call = _engine.StringCall(self._run_func, store, self._store_context, code, setup)
        return self._call

    def _finish(self, call: _engine.StringCall) -> dict[str, Any] | Trapped:
        """The run's report, once its call is done (or dropped)."""
        try:
            raw, error = call.value(), None
        except (wasmtime.WasmtimeError, wasmtime.Trap) as e:
            raw, error = "", e
        self._end(call)
        if error is not None:
            return self._trapped(error)
        report, memory = read_report(raw, self.limits, self.calls.count)
        if memory is not None:
            self.memory_json = memory
        return report

    def _end(self, call: _engine.StringCall) -> None:
        call.close()
        self._call = None
        self._answer = None
        self._wake = None
        self._running = False
        self.calls.end()
        self.runtime.ticker.release()
        if self.closed:
            self._drop_instance()

    async def run(
        self, code: str, timeout: float, clock: str | None = None, batch: str | None = None
    ) -> dict[str, Any] | Trapped:
        """Run ``code`` on this thread's event loop; with ``batch`` (JSON ``{"batch":
        [code, ...], "timeouts": [...]}``) run those pieces as concurrent tasks instead
        (their results are in ``batch``). ``clock`` (JSON) is the run's clock base and
        seed, for replayable runs."""
        loop = asyncio.get_running_loop()
        self.loop = loop
        call = self._begin(code, timeout, clock, batch)
        if call is None:
            return _closed_report()
        cancelled = False
        try:
            while True:
                _engine.driving(self)
                self._ticked = False
                if call.poll():
                    break
                try:
                    if self._answer is not None:  # waiting in `poll` for host calls
                        if self.calls.fresh:
                            # The calls it just started take their first step in the loop's
                            # next round, and most (a quick skill) end in it: resume right
                            # after it, with no wake-up future and no second round.
                            self.calls.fresh = False
                            await asyncio.sleep(0)
                            self.calls.hold = False
                            if self.poll_ready():
                                continue
                        await self._wait()
                    elif self._ticked:  # an epoch tick: the loop's other work goes first
                        for _ in range(YIELD_ROUNDS):
                            await asyncio.sleep(0)
                    else:  # cannot happen (no other import suspends); never spin
                        await asyncio.sleep(0.001)
                except asyncio.CancelledError:
                    # Stop the guest, let it end (within a tick, or its grace if it waits
                    # in `poll`: no wait can block it), then re-raise. A suspended call is
                    # never dropped: wasmtime cannot drop a fiber inside a host call.
                    if not cancelled:
                        cancelled = True
                        self._set_stop("Interrupted: the run was cancelled", grace=self._answer is not None)
        finally:
            if self._limit_timer is not None:
                self._limit_timer.cancel()
                self._limit_timer = None
            report = self._finish(call)
        if cancelled:
            raise asyncio.CancelledError
        return report

    async def _wait(self) -> None:
        """Until a host call completes, the stop flag is set or the guest's timer ends."""
        loop = self.loop
        wake = self._wake = loop.create_future()  # type: ignore[union-attr]
        if self.poll_ready():
            return
        if self._limit_timer is None:  # a waiting guest wakes at its time limit
            self._limit_timer = loop.call_later(max(0.0, self._deadline - time.monotonic()), self.wake_up)  # type: ignore[union-attr]
        timer = None
        if self._wait_until is not None:
            timer = loop.call_later(max(0.0, self._wait_until - time.monotonic()), self.wake_up)  # type: ignore[union-attr]
        try:
            await wake
        finally:
            if timer is not None:
                timer.cancel()
            self._wake = None

    def run_sync(self, code: str, timeout: float) -> dict[str, Any] | Trapped:
        """Run ``code`` on this thread with no event loop (warming pooled instances):
        host calls are answered with an error, and a guest timer is slept through."""
        call = self._begin(code, timeout, None, None)
        if call is None:
            return _closed_report()
        try:
            _engine.driving(self)
            while not call.poll():  # the next poll answers the wait (or stops it at the limit)
                if not self.poll_ready():
                    time.sleep(max(0.0, min(self._wait_until or self._deadline, self._deadline) - time.monotonic()))
        finally:
            report = self._finish(call)
        return report

    def _trapped(self, e: BaseException) -> Trapped:
        stop = self._stop
        text = str(e)
        if _engine.WASI_CLOCK_WAIT in text:
            reason = "a blocking wait on WASI's clock"
            error = _engine.WASI_CLOCK_WAIT
        elif stop is not None:
            error = stop
            reason = "the time limit" if stop.startswith("TimeoutError") else "an interrupt"
        elif "stack" in text and ("exhausted" in text or "overflow" in text):
            reason = "a stack overflow"
            error = "RecursionError: the code recursed so deeply that the sandbox's stack overflowed"
        elif "memory" in text or "unreachable" in text or "out of bounds" in text:
            reason = "the runtime crashed (most often: out of memory)"
            error = (
                f"MemoryError: the sandbox's Python runtime crashed, most likely out of memory "
                f"(limit {self.limits.memory_mb} MB, memory_mb)"
            )
        else:
            cause = text.rpartition("Caused by:")[2].strip() or text.strip()  # wasmtime's message, not its backtrace
            first = cause.splitlines()[0] if cause else type(e).__name__
            reason = f"a crash ({first[:200]})"
            error = f"SandboxError: the sandbox's runtime crashed: {first[:500]}"
        self._drop_instance()
        if self.closed:
            return Trapped(reason, error)
        # Re-seed the next instance from the last saved state of `memory`.
        self._seed = True
        try:
            self.instantiate()
        except Exception:  # retried lazily at the next run
            self._drop_instance()
        return Trapped(reason, error)

    def seed(self, memory_json: str, target_json: str | None) -> None:
        """Give the guest this ``memory`` (JSON of a dict) and served call (JSON, or None)
        at the next run. Nothing is sent when the guest holds them already: an instance
        no run has used has an empty ``memory`` and serves no call."""
        self.memory_json = memory_json
        self.target_json = target_json
        self._seed = not (self._pristine and memory_json == "{}" and target_json is None)

    def _setup(self, clock: str | None) -> str:
        """The run's setup argument (JSON, or "" for none): what the guest does not hold
        yet. A pooled instance's first run then parses little in the guest, whose JSON
        code is cold after idle. ``clock`` (JSON) fixes the run's clock; a run without
        one after a run with one gets the real clock back."""
        self._pristine = False
        fields = []
        lim = self.limits
        held = (lim.output_kb, lim.max_recursion, lim.max_payload_kb)
        if held != self._guest_limits:
            fields.append(
                f'"limits":{{"output":{lim.output_kb * 1024},"recursion":{lim.max_recursion},'
                f'"payload":{lim.max_payload_kb * 1024}}}'
            )
            self._guest_limits = held
        if self._seed:
            self._seed = False
            fields.append('"memory":' + self.memory_json)
            if self.target_json is not None:
                fields.append('"target":' + self.target_json)
        if clock is not None or self._guest_clock:
            fields.append('"clock":' + (clock or "null"))
            self._guest_clock = clock is not None
        return "{" + ",".join(fields) + "}" if fields else ""

    # -- the poll import (called from inside wasm, on the driving thread) ------------------

    def poll_start(self, batch: str, timeout_ms: int, answer: _engine.PollAnswer) -> None:
        """The guest submits the calls it issued since its last wait and waits for
        completions: start them (_calls.py); the answer is written when one is done."""
        if self._stop is not None:
            return answer.err(self._stop)
        problem = self.calls.submit(batch)
        _engine.driving(self)  # a call's first step may have driven another sandbox
        if problem is not None:
            return answer.err(problem)
        self._answer = answer
        self._wait_until = None if timeout_ms == NO_TIMER else time.monotonic() + timeout_ms / 1000
        if timeout_ms == 0 or self.calls.done:  # calls that ended in their first step (_calls.py)
            self.poll_ready()

    def poll_ready(self) -> bool:
        """Answer the guest's wait if it is over (completions, a stop, or its timer);
        wasmtime asks this at each poll of the run while the guest waits."""
        answer = self._answer
        if answer is None:
            return True
        if self._stop is not None:
            answer.err(self._stop)
        elif (self.calls.done and not self.calls.hold) or (
            self._wait_until is not None and time.monotonic() >= self._wait_until
        ):
            done, self.calls.done = self.calls.done, []
            answer.ok("[" + ",".join(done) + "]")
        elif time.monotonic() >= self._deadline:
            self._set_stop(self._timeout_message(), grace=True)
            answer.err(self._stop)  # type: ignore[arg-type]
        else:
            return False
        self._answer = None
        return True

    def poll_abort(self, message: str, answer: _engine.PollAnswer | None = None) -> None:
        """The host failed while handling a wait: the guest gets ``message`` as an error."""
        answer = answer or self._answer
        self._answer = None
        if answer is not None:
            answer.err(message)


def _closed_report() -> dict[str, Any]:
    return {"value": None, "finished": False, "output": "", "error": "Interrupted: the sandbox was closed", "calls": 0}


def shutdown_all() -> None:
    """At exit: free every instance that no run is in. A run left suspended by an event
    loop that stopped mid-run keeps its store to the process's end (a store must outlive
    the call in it, and wasmtime cannot drop a fiber suspended in a host call), so its
    core is never finalized."""
    for core in list(_live_cores):
        if core._call is not None:
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(core))
        else:
            core.close()


atexit.register(shutdown_all)
