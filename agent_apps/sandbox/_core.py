"""One sandbox's wasm side: a worker thread that owns a Store and an instance.

All wasm execution of a sandbox happens on its own worker thread, never on the
asyncio event loop, so a runaway guest cannot stall other work. The thread
stays for the sandbox's lifetime (no thread per run: the hand-off costs tens of
microseconds, a new thread more) and ends on ``close``.

While agent code awaits host calls, the worker thread is blocked inside the
``poll`` import: the calls themselves run as tasks on the event loop that owns
the sandbox (submitted with ``call_soon_threadsafe``), and their completions
wake the worker through a condition variable. So ``asyncio.gather`` in the
guest becomes real concurrency on the host with no thread per call.

A trap (time limit, out of memory, stack overflow, runtime crash) poisons a
component instance; the core then drops it and instantiates a fresh one,
seeded with the last JSON snapshot of ``memory``.
"""

from __future__ import annotations

import asyncio
import atexit
import contextvars
import inspect
import json
import queue
import threading
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

import wasmtime
from wasmtime.component import Variant

from .._json import MAX_DEPTH
from .._json import loads as _loads
from ..errors import SandboxError
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
MAX_ERROR_MESSAGE = 8 * 1024
#: One poll may carry at most this many times ``max_payload_kb`` of JSON (several
#: gathered calls, each within the payload limit); more is refused before parsing.
MAX_BATCH_PAYLOADS = 16
_ENVELOPE_HEAD = '{"value":'
_ENVELOPE_TAIL = ',"finished":'
_BATCH_HEAD = '{"batch":['
#: ``call_host(name, args)``, or ``call_host(name, args, **options)`` for a call that
#: carries options (``middleware=[...]``, ``next=True``; see ``_refs.options_refusal``).
CallHost = Callable[..., Awaitable[Any]]

#: Workers the watchdog gave up on (stuck in a wait that wasmtime cannot interrupt)
#: keep their store, and all its memory, until that wait returns: a store must not be
#: freed while its thread runs inside it. So at most this many may exist per process;
#: at the cap no sandbox starts or runs until one of them comes back.
MAX_STUCK = 4

_live_cores: weakref.WeakSet[Core] = weakref.WeakSet()
_abandoned: weakref.WeakSet[Core] = weakref.WeakSet()  # stuck workers, until their thread ends


def refuse_if_too_many_stuck() -> None:
    """Raise :class:`SandboxError` while ``MAX_STUCK`` abandoned workers are alive."""
    stuck = list(_abandoned)
    if len(stuck) >= MAX_STUCK:
        held = sum(core.limits.memory_mb for core in stuck)
        raise SandboxError(
            f"{len(stuck)} sandboxes are stuck in blocking system calls (at most {MAX_STUCK} per process) "
            f"and hold up to {held} MB until their waits return; no sandbox starts or runs until one "
            "does (restart the process to free them now)"
        )


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
        self._cv = threading.Condition()
        self._completed: list[str] = []
        self._stop: str | None = None    # message when the host wants the run stopped
        self._trap_at = 0.0              # when a stopped guest still running gets trapped
        self._in_poll = False
        self._deadline = 0.0
        self._timeout = 0.0
        self._calls = 0
        self._call_ids: set[int] = set()  # every call id the guest used this run
        self._running = False
        self._run_token = 0
        self._submitted = 0              # last sequence number handed out (event loop)
        self._run_seq = 0                # sequence number of the last run started
        self._cancelled_seqs: set[int] = set()
        self._tasks: dict[int, asyncio.Task] = {}
        self._ours_cancelled: set[int] = set()
        # the wasm side
        self.store: wasmtime.Store | None = None
        self._run_func: Any = None
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.closed = False
        self._thread = threading.Thread(target=self._work, name="agent-apps-sandbox", daemon=True)
        self._thread.start()
        _live_cores.add(self)

    # -- worker thread -------------------------------------------------------------

    def _work(self) -> None:
        _engine.bind_thread(self)
        try:
            while True:
                job = self._jobs.get()
                if job is None:
                    break
                fn, args, done = job
                try:
                    result, ok = fn(*args), True
                except BaseException as e:  # reported to the caller
                    result, ok = e, False
                if done is not None:
                    try:
                        done(ok, result)
                    except Exception:  # e.g. the caller's event loop is closed
                        pass
        finally:
            self._drop_instance()
            _abandoned.discard(self)

    def submit(self, fn: Callable[..., Any], *args: Any, done: Callable[[bool, Any], None] | None = None) -> None:
        if self.closed:
            raise RuntimeError("the sandbox is closed")
        self._jobs.put((fn, args, done))

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn`` on the worker thread and wait for it (for sync callers)."""
        box: list[Any] = []
        ev = threading.Event()

        def done(ok: bool, result: Any) -> None:
            box.append((ok, result))
            ev.set()

        self.submit(fn, *args, done=done)
        ev.wait()
        ok, result = box[0]
        if not ok:
            raise result
        return result

    def stop_thread(self) -> None:
        """Ask the worker to finish its current job, drop the store and exit."""
        if not self.closed:
            self.closed = True
            self.interrupt("the sandbox was closed")
            self._jobs.put(None)

    def abandon(self) -> None:
        """Give up on a worker stuck in a host call past its deadline (the watchdog).

        The thread is left to come back on its own; then the epoch callback traps
        the guest, and the thread drops the store and exits. Until then it keeps
        the store alive (its frame holds this core), so nothing is freed under it.
        """
        self.stop_thread()
        _abandoned.add(self)

    def join(self, timeout: float | None = None) -> None:
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    # -- instance lifecycle (worker thread) ------------------------------------------

    def instantiate(self) -> None:
        rt = self.rt
        store = wasmtime.Store(rt.engine)
        store.set_wasi(wasmtime.WasiConfig())  # no preopens, no env, no args, no stdio
        self._apply_limits(store)
        _engine.watch_deadline(store, self._check_deadline)
        store.set_epoch_deadline(1)
        rt.ticker.acquire()  # instantiation runs guest init code: keep it bounded too
        self._deadline = time.monotonic() + 60.0
        try:
            instance = rt.linker.instantiate(store, rt.component)
        finally:
            rt.ticker.release()
        func = instance.get_func(store, "run")
        if func is None:
            raise RuntimeError("the sandbox component has no 'run' export")
        self.store = store
        self._run_func = _engine.StringFunc(func)

    def warm_up(self) -> None:
        """Run a throwaway snippet so the pages CPython touches on a first run are
        already faulted in (copy-on-write of the snapshot); pools do this before
        handing an instance out, which makes its first result ~10x faster."""
        self.memory_json = '{"warm": [1, "up"]}'
        self.pending_setup = self.setup_json(memory=True)  # exercise the seeding path too
        self.run(WARM_UP_CODE, 10.0)
        self.run("1", 10.0)
        self.memory_json = "{}"

    def _apply_limits(self, store: wasmtime.Store) -> None:
        store.set_limits(memory_size=self.limits.memory_mb * 1024 * 1024, instances=100, tables=100, memories=10)
        self._limits_applied = self.limits

    def _drop_instance(self) -> None:
        self._run_func = None
        self.store = None  # the Store is deleted here, on the thread that ran it

    # -- limits --------------------------------------------------------------------------

    def _check_deadline(self) -> str | None:
        """Called on every epoch tick while wasm runs (worker thread); a string traps."""
        now = time.monotonic()
        if self._stop is None:
            if now < self._deadline:
                return None
            self._set_stop(self._timeout_message(), grace=False)
        return self._stop if now >= self._trap_at else None

    def _set_stop(self, message: str, grace: bool) -> None:
        """Record that the run must stop. A guest blocked in ``poll`` gets a grace
        period to unwind cleanly (no trap, no reset); one running code is trapped."""
        self._stop = message
        self._trap_at = time.monotonic() + (STOP_GRACE if grace else 0.0)

    def _timeout_message(self) -> str:
        return (
            f"TimeoutError: the code ran longer than its time limit of {self._timeout:g} s "
            "(timeout) and was stopped"
        )

    def interrupt(self, message: str = "the run was interrupted", seq: int | None = None) -> None:
        """Stop the running guest (any thread): at the next epoch tick, or at once
        if it is waiting for host calls. With ``seq`` (the number ``next_seq``
        gave a submitted run), only that run is stopped, even if it has not
        started yet."""
        with self._cv:
            if seq is not None and (seq > self._run_seq or (seq == self._run_seq and not self._running)):
                self._cancelled_seqs.add(seq)  # queued or not yet entered: skip it
            elif self._running and self._stop is None and (seq is None or seq == self._run_seq):
                self._set_stop(f"Interrupted: {message}", grace=self._in_poll)
            self._cv.notify_all()

    def next_seq(self) -> int:
        """A sequence number for the next run to be submitted (event loop thread)."""
        self._submitted += 1
        return self._submitted

    # -- the run (worker thread) ------------------------------------------------------------

    def run(
        self, code: str, timeout: float, seq: int | None = None, clock: str | None = None, batch: str | None = None
    ) -> dict[str, Any]:
        """Run ``code``; with ``batch`` (JSON ``{"batch": [code, ...], "timeouts": [...]}``)
        run those pieces as concurrent tasks instead (their results are in ``batch``).
        ``clock`` (JSON) is the run's clock base and seed, for replayable runs."""
        if seq is not None:
            with self._cv:
                self._run_seq = seq
        if not self.closed and self.store is None:
            self.instantiate()
        store = self.store
        with self._cv:
            # A cancel that arrived before this point skips the run entirely.
            skipped = seq is not None and seq in self._cancelled_seqs
            self._cancelled_seqs.discard(seq)  # type: ignore[arg-type]
            if skipped or self.closed or store is None:
                why = "the sandbox was closed" if self.closed else "the run was cancelled"
                return {"value": None, "finished": False, "output": "", "error": f"Interrupted: {why}", "calls": 0}
            self._stop = None
            self._completed = []
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
        self._timeout = timeout
        self._deadline = time.monotonic() + timeout
        ticker = self.rt.ticker
        ticker.acquire()
        store.set_epoch_deadline(1)
        try:
            raw = self._run_func(store, code, setup)
        except (wasmtime.WasmtimeError, wasmtime.Trap) as e:
            raise self._trapped(e, setup) from None
        finally:
            ticker.release()
            with self._cv:
                self._running = False
            self._run_token += 1
        return self._parse_envelope(raw)

    def _trapped(self, e: BaseException, setup: str) -> Trapped:
        stop = self._stop
        text = str(e)
        if stop is not None:
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
            first = text.strip().splitlines()[0] if text.strip() else type(e).__name__
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
        "memory":...}`` with the value first, so the value's text is cut out and judged
        on its own (size, depth, NaN) and a refused value still leaves the output and
        the memory. A batch (``Sandbox.run_batch``) writes ``{"batch":[REPORT, ...],
        "memory":...}``, one report per piece of code, each judged the same way. Agent
        code can tamper with the runtime, so nothing here trusts it: what does not fit
        is refused or cut with a note, never raised.
        """
        if isinstance(raw, str) and raw.startswith(_BATCH_HEAD):
            return self._parse_batch(raw)
        cut = raw.rfind(_ENVELOPE_TAIL) if isinstance(raw, str) and raw.startswith(_ENVELOPE_HEAD) else -1
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

    def _checked(self, env: dict[str, Any], value_text: str, notes: list[str]) -> dict[str, Any]:
        """One result of the guest, its fields bounded and typed (``value_text``: the
        value's JSON, judged on its own)."""
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
        if len(value_text) > lim.max_payload_kb * 1024:
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

    # -- the poll import (worker thread, called from inside wasm) ---------------------------

    def poll(self, batch: str, timeout_ms: int) -> Variant:
        if self._stop is not None:
            return Variant("err", self._stop)
        lim = self.limits
        max_payload = lim.max_payload_kb * 1024
        immediate: list[str] = []
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
            return Variant("err", f"SandboxError: malformed request from the sandbox runtime ({e})")
        big = len(batch) > max_payload
        for item in calls:
            try:
                starts.append(self._check_call_entry(item, big))
            except _CallRefused as refused:
                immediate.append(_err_entry(refused.call_id, refused.type_name, refused.message))
            except _Malformed as e:
                return Variant("err", f"SandboxError: malformed call in a request from the sandbox runtime ({e})")
        cancel_ids = [c for c in cancels if isinstance(c, int)]
        if starts or cancel_ids:
            loop = self.loop
            if loop is None or loop.is_closed():
                for call_id, *_ in starts:
                    immediate.append(_err_entry(call_id, "SandboxError", "the sandbox's event loop is gone"))
            else:
                loop.call_soon_threadsafe(self._start_calls, self._run_token, starts, cancel_ids)
        with self._cv:
            if immediate:
                self._completed.extend(immediate)
            self._in_poll = True
            if not self._completed and timeout_ms != 0:
                wait_until = None if timeout_ms == NO_TIMER else time.monotonic() + timeout_ms / 1000
                while not self._completed and self._stop is None:
                    now = time.monotonic()
                    if now >= self._deadline:
                        self._set_stop(self._timeout_message(), grace=True)
                        break
                    until = self._deadline if wait_until is None else min(wait_until, self._deadline)
                    if wait_until is not None and now >= wait_until:
                        break
                    self._cv.wait(until - now)
            self._in_poll = False
            if self._stop is not None:
                return Variant("err", self._stop)
            done, self._completed = self._completed, []
        return Variant("ok", "[" + ",".join(done) + "]")

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

    def _start_calls(self, token: int, starts: list[tuple[int, str, Any, Any]], cancels: list[int]) -> None:
        if token != self._run_token:
            return  # the run that issued these calls is over
        loop, context = self.loop, self.context
        for call_id, name, args, options in starts:
            coro = self._one_call(token, call_id, name, args, options)
            self._tasks[call_id] = loop.create_task(coro, context=context.copy() if context is not None else None)  # type: ignore[union-attr]
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
                payload = json.dumps(result, allow_nan=False)
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
            with self._cv:
                self._completed.append(_err_entry(call_id, type(e).__name__, str(e) or "host interrupted"))
                self._cv.notify()
            raise
        finally:
            self._tasks.pop(call_id, None)
            self._ours_cancelled.discard(call_id)
        if entry is not None and token == self._run_token:
            with self._cv:
                self._completed.append(entry)
                self._cv.notify()

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


def shutdown_all(timeout: float = 2.0) -> None:
    """Stop every live sandbox thread (atexit: never delete a store mid-run)."""
    cores = list(_live_cores)
    for core in cores:
        core.stop_thread()
    deadline = time.monotonic() + timeout
    for core in cores:
        core.join(max(0.0, deadline - time.monotonic()))


atexit.register(shutdown_all)
