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
"""

from __future__ import annotations

import asyncio
import atexit
import contextvars
import ctypes
import inspect
import json
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

import wasmtime

from .._json import MAX_DEPTH
from .._json import loads as _loads
from . import _engine
from ._limits import SandboxLimits
from ._refs import options_refusal, ref_refusal

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
MAX_ERROR_MESSAGE = 8 * 1024
#: One poll may carry at most this many times ``max_payload_kb`` of JSON (several
#: gathered calls, each within the payload limit); more is refused before parsing.
MAX_BATCH_PAYLOADS = 16
#: One encoder for every call result (``json.dumps`` with options builds one per call).
_encode = json.JSONEncoder(allow_nan=False).encode
_ENVELOPE_HEAD = '{"value":'
_ENVELOPE_TAIL = ',"finished":'
_BATCH_HEAD = '{"batch":['
#: ``call_host(name, args)``, or ``call_host(name, args, **options)`` for a call that
#: carries options (``middleware=[...]``, ``next=True``; see ``_refs.options_refusal``).
CallHost = Callable[..., Awaitable[Any]]

_live_cores: weakref.WeakSet[Core] = weakref.WeakSet()


def _err_entry(call_id: int, type_name: str, message: str) -> str:
    if len(message) > MAX_ERROR_MESSAGE:
        message = message[:MAX_ERROR_MESSAGE] + " [message truncated]"
    return json.dumps([call_id, False, {"type": type_name, "message": message}])


class Trapped(Exception):
    """The guest trapped; ``reason`` says why in words for the model."""

    def __init__(self, reason: str, error: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.error = error


class Core:
    def __init__(self) -> None:
        self.rt = _engine.runtime()
        self.limits = SandboxLimits()
        self._limits_applied: SandboxLimits | None = None
        self.memory_json = "{}"          # last saved JSON state of `memory`
        self.pending_setup = ""          # JSON for the next run's setup argument
        self.loop: asyncio.AbstractEventLoop | None = None
        #: the context of the code that started the run: host calls run in a copy of
        #: it, so context variables (an approval session, a security mode) reach them
        self.context: contextvars.Context | None = None
        self.call_host: CallHost | None = None
        self.caller_name = "agent code"
        self.target_json: str | None = None  # the served call, in middleware mode
        # per-run state
        self._completed: list[str] = []
        self._stop: str | None = None    # message when the host wants the run stopped
        self._trap_at = 0.0              # when a stopped guest still running gets trapped
        self._deadline = 0.0
        self._timeout = 0.0
        self._calls = 0
        self._call_ids: set[int] = set()  # every call id the guest used this run
        self._running = False
        self._run_token = 0
        self._tasks: dict[int, asyncio.Task] = {}
        self._fresh_calls = False        # the guest's last wait started host calls
        self._ours_cancelled: set[int] = set()
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
        rt = self.rt
        store = wasmtime.Store(rt.engine)
        store.set_wasi(wasmtime.WasiConfig())  # no preopens, no env, no args, no stdio
        self._apply_limits(store)
        _engine.watch_deadline(store, self._check_deadline)
        store.set_epoch_deadline(1)
        self._stop = None
        self._deadline = time.monotonic() + 60.0  # instantiation runs guest init code: bound it too
        call, raw = _engine.start_instantiate(rt, store)
        rt.ticker.acquire()
        try:
            _engine.driving(self)
            while not call.poll():
                pass  # an epoch tick: instantiation is our code, it ends on its own
            call.check()
        finally:
            call.close()
            rt.ticker.release()
        self._run_func = _engine.export_func(store, raw, "run")
        self._store_context = _engine.context_address(store)
        self.store = store

    def warm_up(self) -> None:
        """Run a throwaway snippet so the pages CPython touches on a first run are
        already faulted in (copy-on-write of the snapshot); pools do this before
        handing an instance out, which makes its first result ~10x faster."""
        self.memory_json = '{"warm": [1, "up"]}'
        self.pending_setup = self.setup_json(memory=True)  # exercise the seeding path too
        self.run_sync(WARM_UP_CODE, 10.0)
        self.run_sync("1", 10.0)
        self.memory_json = "{}"

    def _apply_limits(self, store: wasmtime.Store) -> None:
        store.set_limits(memory_size=self.limits.memory_mb * 1024 * 1024, instances=100, tables=100, memories=10)
        self._limits_applied = self.limits

    def _drop_instance(self) -> None:
        if self._call is not None:  # a store must outlive the call in it; the run drops it
            return
        self._run_func = None
        self.store = None

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
        self._wake_up()

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

    def _wake_up(self) -> None:
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
        self._completed = []
        self._answer = None
        self._running = True
        if self._limits_applied is not self.limits:
            self._apply_limits(store)
        setup, self.pending_setup = self.pending_setup, ""
        if clock is not None:  # the run's clock base and seed (JSON), for replayable runs
            setup = (setup or self.setup_json(memory=False))[:-1] + ',"clock":' + clock + "}"
        if batch is not None:
            setup = batch if not setup else setup[:-1] + "," + batch[1:]  # two JSON objects, one
        self._calls = 0
        self._call_ids = set()
        self._fresh_calls = False
        self._timeout = timeout
        self._deadline = time.monotonic() + timeout
        self.rt.ticker.acquire()
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
        return self._trapped(error) if error is not None else self._parse_envelope(raw)

    def _end(self, call: _engine.StringCall) -> None:
        call.close()
        self._call = None
        self._answer = None
        self._wake = None
        self._running = False
        self._run_token += 1
        self.rt.ticker.release()
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
                        if self._fresh_calls:
                            # The calls it just started take their first step in the loop's
                            # next round, and most (a quick skill) end in it: resume right
                            # after it, with no wake-up future and no second round.
                            self._fresh_calls = False
                            await asyncio.sleep(0)
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
            self._limit_timer = loop.call_later(max(0.0, self._deadline - time.monotonic()), self._wake_up)  # type: ignore[union-attr]
        timer = None
        if self._wait_until is not None:
            timer = loop.call_later(max(0.0, self._wait_until - time.monotonic()), self._wake_up)  # type: ignore[union-attr]
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
        self.pending_setup = self.setup_json(memory=True)
        try:
            self.instantiate()
        except Exception:  # retried lazily at the next run
            self._drop_instance()
        return Trapped(reason, error)

    def setup_json(self, memory: bool) -> str:
        lim = self.limits
        limits = (
            f'{{"output":{lim.output_kb * 1024},"recursion":{lim.max_recursion},'
            f'"payload":{lim.max_payload_kb * 1024}}}'
        )
        if memory:
            target = "" if self.target_json is None else ',"target":' + self.target_json
            return '{"limits":' + limits + ',"memory":' + self.memory_json + target + "}"
        return '{"limits":' + limits + "}"

    def _parse_envelope(self, raw: str) -> dict[str, Any]:
        """Check the guest's report of a run: every limit again, host-side.

        The runtime writes ``{"value":VALUE,"finished":...,"output":...,"error":...,
        "memory":...}`` with the value first, so the value's text can be cut out and
        judged on its own (size, depth, NaN) and a refused value still leaves the output
        and the memory; a report that fits the value's size limit is parsed whole first
        (one parse), and judged in parts only if that fails. A batch (``Sandbox.run_batch``) writes ``{"batch":[REPORT, ...],
        "memory":...}``, one report per piece of code, each judged the same way. Agent
        code can tamper with the runtime, so nothing here trusts it: what does not fit
        is refused or cut with a note, never raised.
        """
        if isinstance(raw, str) and raw.startswith(_BATCH_HEAD):
            return self._parse_batch(raw)
        cut = raw.rfind(_ENVELOPE_TAIL) if isinstance(raw, str) and raw.startswith(_ENVELOPE_HEAD) else -1
        if cut >= 0 and len(raw) <= self.limits.max_payload_kb * 1024:
            # The whole report is within the value's own size limit (the common case):
            # one parse judges it all, the value one level down getting MAX_DEPTH. If it
            # fails, the parts are judged apart below, to say which one was wrong.
            try:
                env = _loads(raw, max_depth=MAX_DEPTH + 1)
            except ValueError:
                pass
            else:
                if isinstance(env, dict):
                    return self._checked(env, None, self._keep_memory(env.get("memory")))
        try:
            if cut < 0:
                raise ValueError("not a run report")
            env = _loads("{" + raw[cut + 1 :])
            if not isinstance(env, dict):
                raise ValueError("not an object")
        except ValueError as e:
            return self._malformed(e)
        notes = self._keep_memory(env.get("memory"))
        return self._checked(env, raw[len(_ENVELOPE_HEAD) : cut], notes)

    def _parse_batch(self, raw: str) -> dict[str, Any]:
        try:
            env = _loads(raw, max_depth=MAX_DEPTH + 3)  # {batch: [{value: ...}]}: values get MAX_DEPTH
            parts = env.get("batch") if isinstance(env, dict) else None
            if not isinstance(parts, list):
                raise ValueError("not a batch report")
        except ValueError as e:
            return self._malformed(e)
        notes = self._keep_memory(env.get("memory"))
        checked = []
        for index, part in enumerate(parts):
            part = part if isinstance(part, dict) else {}
            last = index == len(parts) - 1
            checked.append(self._checked(part, json.dumps(part.get("value")), notes if last else []))
        return {**self._malformed(ValueError("a batch has no single result")), "batch": checked}

    def _malformed(self, e: Exception) -> dict[str, Any]:
        return {
            "value": None, "finished": False, "output": "", "calls": self._calls,
            "error": f"SandboxError: the sandbox runtime returned a malformed result ({e}); "
                     "was it tampered with?",
        }

    def _keep_memory(self, mem: Any) -> list[str]:
        """Keep the guest's memory snapshot if it is sound; else the note that says why not."""
        if mem is None:
            return []
        problem = self._memory_problem(mem)
        if problem is not None:
            return [f"[error: memory was not saved: {problem}; the last saved memory is kept]"]
        self.memory_json = mem
        return []

    def _checked(self, env: dict[str, Any], value_text: str | None, notes: list[str]) -> dict[str, Any]:
        """One result of the guest, its fields bounded and typed (``value_text``: the
        value's JSON, judged on its own; None: ``env["value"]`` was parsed with the
        report, which was within the value's limits)."""
        lim = self.limits
        out = env.get("output")
        limit = lim.output_kb * 1024
        if not isinstance(out, str):
            out = ""
        elif len(out) > limit + 2048:  # the guest truncates; this only bounds a tampered guest
            out = out[:limit] + "\n[output truncated by the host]"
        err = env.get("error")
        if err is not None:
            err = err if isinstance(err, str) else "SandboxError: the run reported a malformed error"
            if len(err) > limit + 2048:
                err = err[:limit] + "\n[error message truncated by the host]"
        finished = env.get("finished") is True
        value: Any = None
        if value_text is None:
            value = env.get("value")
        elif len(value_text) > lim.max_payload_kb * 1024:
            err = err or (
                f"ValueError: the run's value is too large: {len(value_text) // 1024} KB > "
                f"{lim.max_payload_kb} KB (max_payload_kb); return less, or print a summary"
            )
            finished = False
        else:
            try:
                value = _loads(value_text)
            except ValueError as e:
                err = err or f"ValueError: the run's value was refused: {e}"
                finished = False
        if notes:
            out = (out + "\n" if out and not out.endswith("\n") else out) + "\n".join(notes)
        return {"value": value, "finished": finished, "output": out, "error": err, "calls": self._calls}

    def _memory_problem(self, snapshot: Any) -> str | None:
        """Why a memory snapshot from the guest cannot be kept, or None."""
        if not isinstance(snapshot, str):
            return "the snapshot is not JSON text"
        if len(snapshot) > self.limits.max_payload_kb * 1024:
            return (
                f"its JSON is {len(snapshot) // 1024} KB, more than {self.limits.max_payload_kb} KB "
                "(max_payload_kb); it stays usable in this sandbox but would be lost if the sandbox is reset"
            )
        try:
            if not isinstance(_loads(snapshot), dict):
                return "memory must be a dict"
        except ValueError as e:
            return str(e)
        return None

    # -- the poll import (called from inside wasm, on the driving thread) ------------------

    def poll_start(self, batch: str, timeout_ms: int, answer: _engine.PollAnswer) -> None:
        """The guest submits the calls it issued since its last wait and waits for
        completions: start them as tasks; the answer is written when one is done."""
        if self._stop is not None:
            return answer.err(self._stop)
        lim = self.limits
        max_payload = lim.max_payload_kb * 1024
        starts: list[tuple[int, str, Any, Any]] = []
        try:
            if len(batch) > MAX_BATCH_PAYLOADS * max_payload:
                raise ValueError(
                    f"{len(batch) // 1024} KB in one wait, more than {MAX_BATCH_PAYLOADS} x max_payload_kb"
                )
            req = _loads(batch, max_depth=MAX_DEPTH + 3)  # {calls: [[id, name, args]]}: args get MAX_DEPTH
            calls = req["calls"]
            cancels = req.get("cancel") or []
            if not isinstance(calls, list) or not isinstance(cancels, list):
                raise ValueError("calls and cancel must be lists")
            if len(calls) > lim.max_calls:
                raise ValueError(f"{len(calls)} calls in one wait, more than max_calls ({lim.max_calls})")
        except (ValueError, KeyError, TypeError) as e:
            return answer.err(f"SandboxError: malformed request from the sandbox runtime ({e})")
        big = len(batch) > max_payload
        for item in calls:
            try:
                starts.append(self._check_call_entry(item, big))
            except _CallRefused as refused:
                self._completed.append(_err_entry(refused.call_id, refused.type_name, refused.message))
            except _Malformed as e:
                return answer.err(f"SandboxError: malformed call in a request from the sandbox runtime ({e})")
        cancel_ids = [c for c in cancels if isinstance(c, int)]
        if starts or cancel_ids:
            self._start_calls(starts, cancel_ids)
        self._answer = answer
        self._wait_until = None if timeout_ms == NO_TIMER else time.monotonic() + timeout_ms / 1000
        if timeout_ms == 0 or self._completed:
            self.poll_ready()

    def poll_ready(self) -> bool:
        """Answer the guest's wait if it is over (completions, a stop, or its timer);
        wasmtime asks this at each poll of the run while the guest waits."""
        answer = self._answer
        if answer is None:
            return True
        if self._stop is not None:
            answer.err(self._stop)
        elif self._completed or (self._wait_until is not None and time.monotonic() >= self._wait_until):
            done, self._completed = self._completed, []
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

    def _check_call_entry(self, item: Any, big: bool) -> tuple[int, str, Any, Any]:
        """The one place that judges a call entry from the guest: ``[id, name, args]``
        or ``[id, name, args, options]``.

        Returns the call to start; raises :class:`_CallRefused` for a call the guest
        gets an error for, :class:`_Malformed` when the entry cannot be answered at
        all (no usable id). Every rule the guest runtime applies is applied again
        here, because agent code can change the runtime.
        """
        if (
            not isinstance(item, list) or len(item) not in (3, 4) or not isinstance(item[0], int)
            or isinstance(item[0], bool)
        ):
            raise _Malformed("a call must be [id, name, args] or [id, name, args, options] with an integer id")
        call_id, name, args = item[:3]
        options = item[3] if len(item) == 4 else None
        if call_id in self._call_ids:
            raise _Malformed(f"call id {call_id} was already used in this run")
        self._call_ids.add(call_id)
        lim = self.limits
        self._calls += 1
        if self._calls > lim.max_calls:
            raise _CallRefused(
                call_id, "LimitExceeded",
                f"too many ctx.manager.invoke() calls in one run (limit {lim.max_calls}, max_calls)",
            )
        refusal = ref_refusal(name)
        if refusal is not None:
            raise _CallRefused(call_id, "ToolNotAllowed", f"{self.caller_name} may not call {_short(name)}: {refusal}")
        if args is not None and not isinstance(args, dict):
            raise _CallRefused(call_id, "ArgsInvalid", f"args of {name!r} must be a JSON object or null")
        problem = options_refusal(options) if options is not None else None
        if problem is not None:
            raise _CallRefused(call_id, problem[0], f"{self.caller_name} calling {name!r}: {problem[1]}")
        if big:
            size = len(json.dumps(args))
            if size > lim.max_payload_kb * 1024:
                raise _CallRefused(
                    call_id, "LimitExceeded",
                    f"args of {name!r} are too large: {size // 1024} KB > {lim.max_payload_kb} KB (max_payload_kb)",
                )
        return call_id, name, args, options

    # -- host calls (event loop thread) ----------------------------------------------------

    def _start_calls(self, starts: list[tuple[int, str, Any, Any]], cancels: list[int]) -> None:
        loop, context, token = self.loop, self.context, self._run_token
        if loop is None:  # a run without an event loop (warming a pooled instance)
            for call_id, *_ in starts:
                self._completed.append(_err_entry(call_id, "SandboxError", "this run has no host functions"))
            starts = []
        for call_id, name, args, options in starts:
            coro = self._one_call(token, call_id, name, args, options)
            self._tasks[call_id] = loop.create_task(coro, context=context.copy() if context is not None else None)  # type: ignore[union-attr]
            self._fresh_calls = True
        for call_id in cancels:
            task = self._tasks.get(call_id)
            if task is not None:
                self._ours_cancelled.add(call_id)
                task.cancel()

    async def _one_call(self, token: int, call_id: int, name: str, args: Any, options: Any = None) -> None:
        entry: str | None
        try:
            if self.call_host is None:
                raise _NoHost("this sandbox has no host functions (no call_host was given)")
            result = self.call_host(name, args, **options) if options else self.call_host(name, args)
            if inspect.isawaitable(result):
                result = await result
            try:
                payload = _encode(result)
            except (TypeError, ValueError) as e:
                entry = _err_entry(call_id, "ResultInvalid", f"{name!r} returned a value that is not JSON: {e}")
            else:
                if len(payload) > self.limits.max_payload_kb * 1024:
                    entry = _err_entry(
                        call_id, "LimitExceeded",
                        f"the result of {name!r} is too large: {len(payload) // 1024} KB "
                        f"> {self.limits.max_payload_kb} KB (max_payload_kb)",
                    )
                else:
                    entry = f"[{call_id},true,{payload}]"
        except asyncio.CancelledError:
            if call_id in self._ours_cancelled or token != self._run_token:
                entry = None
            else:
                entry = _err_entry(call_id, "Cancelled", f"the call of {name!r} was cancelled")
        except Exception as e:
            type_name = getattr(e, "type_name", None) or type(e).__name__
            entry = _err_entry(call_id, type_name, str(e))
        except BaseException as e:  # KeyboardInterrupt, SystemExit: tell the guest, then propagate
            if token == self._run_token:
                self._completed.append(_err_entry(call_id, type(e).__name__, str(e) or "host interrupted"))
                self._wake_up()
            raise
        finally:
            self._tasks.pop(call_id, None)
            self._ours_cancelled.discard(call_id)
        if entry is not None and token == self._run_token:
            self._completed.append(entry)
            self._wake_up()

    def cancel_calls(self) -> None:
        """Cancel host calls left over from a finished run (event loop thread)."""
        for call_id, task in list(self._tasks.items()):
            self._ours_cancelled.add(call_id)
            task.cancel()


class _NoHost(Exception):
    type_name = "SandboxError"


class _CallRefused(Exception):
    """A call from the guest that is answered with an error and never started."""

    def __init__(self, call_id: int, type_name: str, message: str) -> None:
        super().__init__(message)
        self.call_id, self.type_name, self.message = call_id, type_name, message


class _Malformed(Exception):
    """A request the host cannot answer call by call: the whole poll fails."""


def _short(name: Any) -> str:
    text = repr(name)
    return text if len(text) <= 64 else text[:61] + "..."


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
