"""The process-wide wasmtime pieces: engine, compiled component, linker, epoch ticker.

One ``Engine`` and one compiled ``Component`` serve every sandbox in the
process; each sandbox only adds a ``Store`` and an instance (~1 ms, a few MB).

Time limits use epoch interruption: a single ticker thread increments the
engine's epoch every ``TICK`` seconds while any run is active, and each store
has a deadline callback (wasmtime's C API, via ctypes) that, on every tick,
compares the wall clock with that sandbox's own deadline and interrupt flag.
Checking the wall clock (not counting ticks) keeps the limit right when the
ticker oversleeps on a loaded machine.
"""

from __future__ import annotations

import atexit
import ctypes
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

try:
    import wasmtime
    from wasmtime import Config, Engine
    from wasmtime import _ffi as ffi
    from wasmtime.component import Component, Instance, Linker, _enter
except ImportError as exc:  # pragma: no cover - depends on the install
    from ..errors import SandboxError

    raise SandboxError(
        "the sandbox needs wasmtime and componentize-py: pip install 'agent-apps[sandbox]'"
    ) from exc

from . import _build

#: The epoch tick: how long a computing guest runs before it hands the event loop back
#: (and the granularity of time limits). 5 ms keeps the loop's worst delay well under
#: 20 ms; the ticker wakes only while runs are active (see _Ticker).
TICK = 0.005
HOST_INTERFACE = "agent-apps:sandbox/host@0.1.0"
#: The guest's import of WASI's monotonic clock (see ``_CLOCK_FUNCS``).
CLOCK_INTERFACE = "wasi:clocks/monotonic-clock@0.2.9"
_FINALIZER_T = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
#: The fiber stack a guest runs on, shared with the host code its ``poll`` import runs.
ASYNC_STACK = 8 * 1024 * 1024


def engine_config() -> Config:
    """Engine settings; they are part of the cache key (``_build.ENGINE_SETTINGS``)."""
    cfg = Config()
    cfg.epoch_interruption = True
    # The component model's own async (tasks, streams, futures between components) is
    # not used: our guest is a plain component, and its calls are made async by the
    # embedding API. Without it a call sets up no concurrent task state (~5 us a run).
    ffi.wasmtime_config_concurrency_support_set(cfg.ptr(), False)
    # A host call's first step runs on the guest's fiber (inside the ``poll`` import,
    # see _calls.py): give host code the stack a thread has (8 MiB, mapped on demand;
    # wasmtime's default of 2 MiB overflowed at ~2,000 levels of recursion through C).
    ffi.wasmtime_config_async_stack_size_set(cfg.ptr(), ASYNC_STACK)
    return cfg


def new_engine() -> Engine:
    return Engine(engine_config())


# -- crossing the boundary, marshalled by hand ----------------------------------------
#
# Every sandbox runs on the thread that drives it (the event loop's), as an async
# wasm call: wasmtime runs the guest on a fiber (a stack of its own) and returns to
# us, with the guest suspended, at each epoch tick and whenever the guest waits in
# the ``poll`` import for host calls. So a host call costs no thread wake-up at all,
# and a guest computing for seconds still hands the loop back every tick.
#
# The ``run`` export and the ``poll`` import carry only strings (and a u32), so
# both are marshalled with wasmtime's C API directly: wasmtime-py's generic
# component glue rebuilds the function's type and converts every value through
# Python objects on each call (~25 us per crossing here).

_STRING = ffi.WASMTIME_COMPONENT_STRING.value
_RESULT = ffi.WASMTIME_COMPONENT_RESULT.value
_Val = ffi.wasmtime_component_val_t
_ErrP = ctypes.POINTER(ffi.wasmtime_error_t)
_NO_FINALIZER = _FINALIZER_T()  # a NULL function pointer


def _c_function(name: str, restype: Any, *argtypes: Any) -> Any:
    """A handle of our own on a wasmtime C API function, with plain argument types.

    wasmtime-py's wrappers add a Python call and pointer conversions to every call
    (~1-2 us each); these run several times per run and per host call."""
    func = ffi.dll[name]  # a new function object: its types are ours alone
    func.restype, func.argtypes = restype, argtypes
    return func


_byte_vec_new = _c_function("wasm_byte_vec_new", None, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p)
_val_new = _c_function("wasmtime_component_val_new", ctypes.c_void_p, ctypes.c_void_p)
_val_delete = _c_function("wasmtime_component_val_delete", None, ctypes.c_void_p)
_future_poll = _c_function("wasmtime_call_future_poll", ctypes.c_bool, ctypes.c_void_p)
_future_delete = _c_function("wasmtime_call_future_delete", None, ctypes.c_void_p)
_P, _N = ctypes.c_void_p, ctypes.c_size_t
_call_async = _c_function("wasmtime_component_func_call_async", _P, _P, _P, _P, _N, _P, _N, _P)
_set_epoch_deadline = _c_function("wasmtime_context_set_epoch_deadline", None, ctypes.c_void_p, ctypes.c_uint64)
_VAL_SIZE = ctypes.sizeof(_Val)


def _offset(struct: Any, field: str) -> int:
    return int(getattr(struct, field).offset)


_PAYLOAD = _offset(_Val, "of")  # where a value's payload (a string's byte vector) starts
_RESULT_AT = _PAYLOAD + _offset(ffi.wasmtime_component_valunion_t, "result")  # a result's is_ok and val
_RESULT_IS_OK = _RESULT_AT + _offset(ffi.wasmtime_component_valresult_t, "is_ok")
_RESULT_VAL = _RESULT_AT + _offset(ffi.wasmtime_component_valresult_t, "val")


def _set_str(address: int, text: str) -> None:
    """Make the value at ``address`` a component string (owned by whoever receives it)."""
    data = text.encode()
    ctypes.c_uint8.from_address(address).value = _STRING
    _byte_vec_new(address + _PAYLOAD, len(data), data)


_STR_SIZE = _PAYLOAD + _offset(ffi.wasm_byte_vec_t, "size")
_STR_DATA = _PAYLOAD + _offset(ffi.wasm_byte_vec_t, "data")


def _read_str(address: int) -> str:
    """The text of the component string value at ``address``."""
    size = ctypes.c_size_t.from_address(address + _STR_SIZE).value
    data = ctypes.c_void_p.from_address(address + _STR_DATA).value or 0
    return ctypes.string_at(data, size).decode() if size else ""


def _check(err: Any) -> None:
    if err:
        _raise(err)


def _raise(err: Any) -> None:
    error = wasmtime.WasmtimeError._from_ptr(err)
    _enter.maybe_raise_last_exn()
    raise error


def _address(pointer: Any) -> int:
    return ctypes.cast(pointer, ctypes.c_void_p).value or 0


class Call:
    """One async call into wasm (instantiation or the ``run`` export): ``poll()``
    runs the guest until it finishes (True) or suspends (False: an epoch tick, or
    a wait in the ``poll`` import). wasmtime requires everything the call uses to
    stay alive and unchanged until the future is deleted; this object holds it."""

    def __init__(self, future: Any, keep: tuple[Any, ...], err: Any) -> None:
        self._future = future if isinstance(future, int) else _address(future)
        self._keep = keep
        self._err = err
        self.finished = False

    def poll(self) -> bool:
        self.finished = _future_poll(self._future)
        return self.finished

    def close(self) -> None:
        """Delete the future; if the guest is suspended, wasmtime unwinds it (the
        instance is then unusable, as after a trap)."""
        if self._future:
            _future_delete(self._future)
            self._future = 0
            self._keep = ()  # the store may go now (on the reaper's thread, see _Reaper)

    def check(self) -> None:
        """After ``poll()`` returned True: raise what the call failed with, if anything."""
        self.close()
        if self._err:
            err, self._err = self._err, _ErrP()
            _raise(err)


def start_instantiate(rt: Runtime, store: wasmtime.Store) -> tuple[Call, Any]:
    out = ffi.wasmtime_component_instance_t()
    err = _ErrP()
    ctx = store._context()
    fut = ffi.wasmtime_component_linker_instantiate_async(
        rt.linker.ptr(), ctx, rt.component.ptr(), ctypes.byref(out), ctypes.byref(err)
    )
    return Call(fut, (rt, store, ctx, out), err), out


def context_address(store: wasmtime.Store) -> int:
    """The address of ``store``'s context, fixed for the store's life."""
    return _address(store._context())


def set_epoch_deadline(context: int, ticks: int) -> None:
    _set_epoch_deadline(context, ticks)


class StringCall(Call):
    """An async call of an export whose parameters and result are all strings
    (``context``: the store's :func:`context_address`)."""

    def __init__(self, func: Any, store: wasmtime.Store, context: int, *texts: str) -> None:
        params = (_Val * len(texts))()
        base = ctypes.addressof(params)
        for i, text in enumerate(texts):
            _set_str(base + i * _VAL_SIZE, text)
        self._params: Any = params
        self._result = _Val()
        err = _ErrP()
        fut = _call_async(
            ctypes.addressof(func), context, base, len(texts), ctypes.addressof(self._result), 1, ctypes.addressof(err)
        )
        super().__init__(fut, (func, store), err)

    def close(self) -> None:
        super().close()
        params, self._params = self._params, None
        if params is not None:
            base = ctypes.addressof(params)
            for i in range(len(params)):
                _val_delete(base + i * _VAL_SIZE)

    def value(self) -> str:
        """The export's result, once ``poll()`` returned True (raises a trap's error)."""
        finished = self.finished
        self.check()
        result = self._result
        try:
            if not finished:
                raise wasmtime.WasmtimeError("the run was abandoned before it ended")
            if result.kind != _STRING:  # cannot happen with our WIT world
                raise wasmtime.WasmtimeError("the sandbox export returned a non-string")
            return _read_str(ctypes.addressof(result))
        finally:
            _val_delete(ctypes.addressof(result))


def export_func(store: wasmtime.Store, instance_raw: Any, name: str) -> Any:
    func = Instance._from_raw(instance_raw).get_func(store, name)
    if func is None:
        raise RuntimeError(f"the sandbox component has no {name!r} export")
    return func._func


# -- the poll import: dispatched to the sandbox being driven on this thread ----------

_tls = threading.local()


def driving(core: Any) -> None:
    """Route ``poll`` calls made on this thread (inside ``Call.poll``) to ``core``."""
    _tls.core = core


class PollAnswer:
    """Where the answer to one ``poll`` import call goes: ``ok`` / ``err`` write
    the ``result<string, string>`` that wasmtime hands back to the guest."""

    __slots__ = ("_address",)

    def __init__(self, results: int) -> None:
        self._address = results  # of the import's one result value

    def _write(self, ok: bool, text: str) -> None:
        inner = _Val()
        _set_str(ctypes.addressof(inner), text)
        out = self._address
        ctypes.c_uint8.from_address(out).value = _RESULT
        ctypes.c_bool.from_address(out + _RESULT_IS_OK).value = ok
        ctypes.c_void_p.from_address(out + _RESULT_VAL).value = _val_new(ctypes.addressof(inner))

    def ok(self, text: str) -> None:
        self._write(True, text)

    def err(self, text: str) -> None:
        self._write(False, text)


@ffi.wasmtime_func_async_continuation_callback_t
def _poll_ready(_env):  # type: ignore[no-untyped-def]
    """wasmtime asks, at each ``Call.poll``, whether the guest's wait is over."""
    core = getattr(_tls, "core", None)
    if core is None:  # cannot happen: a wait is only polled by its sandbox's driver
        return True
    try:
        return bool(core.poll_ready())
    except BaseException as e:  # never let a Python exception escape into wasmtime
        core.poll_abort(f"SandboxError: host failure in poll: {type(e).__name__}: {e}")
        return True


#: The ``poll`` import's C signature (``wasmtime_component_func_async_callback_t``)
#: with plain addresses: ctypes then builds no pointer object per argument.
_ASYNC_FUNC_T = ctypes.CFUNCTYPE(None, _P, _P, _P, _P, _N, _P, _N, _P, _P)


@_ASYNC_FUNC_T
def _poll(_env, _ctx, _ty, args, nargs, results, nresults, _err_ret, cont):  # type: ignore[no-untyped-def]
    """The guest's ``poll`` import: start its calls; the answer comes when ready."""
    answer = PollAnswer(results)
    core = getattr(_tls, "core", None)
    try:
        if core is None or nargs != 2 or nresults != 1:  # cannot happen with our WIT world
            answer.err("SandboxError: no sandbox is being driven on this thread")
        else:
            timeout_ms = ctypes.c_uint32.from_address(args + _VAL_SIZE + _PAYLOAD).value
            core.poll_start(_read_str(args), timeout_ms, answer)
    except BaseException as e:  # never let a Python exception escape into wasmtime
        message = f"SandboxError: host failure in poll: {type(e).__name__}: {e}"
        if core is not None:
            core.poll_abort(message, answer)
        else:
            answer.err(message)
    then = ffi.wasmtime_async_continuation_t.from_address(cont)
    then.callback = _poll_ready
    then.env = None
    then.finalizer = _NO_FINALIZER


# -- the monotonic clock: no blocking waits -------------------------------------------
#
# A guest runs on the event loop's thread, so nothing it calls may block that thread.
# Every wait of our guest runtime goes through the ``poll`` import; the only other
# way to wait is WASI's own (``wasi:io/poll`` on a clock subscription, reachable by
# agent code that digs the original ``select`` or ``time.sleep`` out of the runtime),
# which wasmtime runs as a blocking host call that epochs cannot interrupt. So the
# guest's monotonic clock is ours: ``now`` and ``resolution`` as WASI's, and the
# two subscriptions (the only way to make a clock pollable) trap, which resets
# the sandbox with a clear error. (wasmtime's async WASI would suspend instead,
# but its clock needs a Tokio runtime the C API does not enter: it aborts the
# process.) Streams cannot block either: no stdin, stdout and stderr are sinks,
# no files, and sockets are denied.

WASI_CLOCK_WAIT = (
    "SandboxError: the code waited on WASI's clock directly (outside the sandbox's event loop), "
    "which the sandbox does not allow; use time.sleep or asyncio.sleep"
)
_U64 = ffi.WASMTIME_COMPONENT_U64.value


@ffi.wasmtime_component_func_callback_t
def _clock_now(_env, _ctx, _ty, _args, _nargs, results, _nresults):  # type: ignore[no-untyped-def]
    now = results[0]
    now.kind = _U64
    now.of.u64 = time.monotonic_ns()
    return 0


@ffi.wasmtime_component_func_callback_t
def _clock_resolution(_env, _ctx, _ty, _args, _nargs, results, _nresults):  # type: ignore[no-untyped-def]
    results[0].kind = _U64
    results[0].of.u64 = 1
    return 0


@ffi.wasmtime_component_func_callback_t
def _clock_subscribe(_env, _ctx, _ty, _args, _nargs, _results, _nresults):  # type: ignore[no-untyped-def]
    return ctypes.cast(ffi.wasmtime_error_new(WASI_CLOCK_WAIT.encode()), ctypes.c_void_p).value or 0


_CLOCK_FUNCS = {
    b"now": _clock_now,
    b"resolution": _clock_resolution,
    b"subscribe-instant": _clock_subscribe,
    b"subscribe-duration": _clock_subscribe,
}


# -- epoch deadline callback ---------------------------------------------------------

_DEADLINE_CB_T = ctypes.CFUNCTYPE(
    ctypes.c_size_t,
    ctypes.POINTER(ffi.wasmtime_context_t),
    ctypes.c_void_p,
    ctypes.POINTER(ctypes.c_uint64),
    ctypes.POINTER(ffi.wasmtime_update_deadline_kind_t),
)
_UPDATE_DEADLINE_YIELD = 1
_deadline_owners: dict[int, Callable[[], str | None]] = {}
_owner_ids = iter(range(1, 1 << 62))


@_DEADLINE_CB_T
def _on_deadline(_ctx, data, delta, kind):  # type: ignore[no-untyped-def]
    try:
        check = _deadline_owners.get(data or 0)
        reason = check() if check is not None else None
    except BaseException:
        reason = "sandbox deadline check failed"
    if reason:
        err = ffi.wasmtime_error_new(reason.encode())
        return ctypes.cast(err, ctypes.c_void_p).value or 0
    delta[0] = 1
    kind[0] = _UPDATE_DEADLINE_YIELD  # hand the thread back to whoever polls the call
    return 0


@_FINALIZER_T
def _finalize(data):  # type: ignore[no-untyped-def]
    _deadline_owners.pop(data or 0, None)


def watch_deadline(store: wasmtime.Store, check: Callable[[], str | None]) -> None:
    """Call ``check`` on every epoch tick while ``store`` runs wasm: a returned
    string traps the guest with that message; otherwise the guest yields (the
    call's ``poll()`` returns False) and goes on when polled again."""
    owner = next(_owner_ids)
    _deadline_owners[owner] = check
    ffi.wasmtime_store_epoch_deadline_callback(store.ptr(), _on_deadline, owner, _finalize)


class _Ticker:
    """Increments the engine epoch every TICK seconds while any run is active.

    It parks (no wake-ups at all) after ``LINGER`` seconds without runs, and
    does not park between back-to-back runs, so a run never pays a thread wake-up.
    """

    LINGER = 2.0

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._active = 0
        self._last_active = 0.0
        self._parked = False
        # Runs take the plain lock (a C-level `with`, no Python frames per run); the
        # condition over it parks and wakes the thread.
        self._lock = threading.Lock()  # never re-entered: no RLock
        self._cv = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        while True:
            with self._cv:
                while self._active == 0 and time.monotonic() - self._last_active > self.LINGER:
                    self._parked = True
                    self._cv.wait()
                self._parked = False
            time.sleep(TICK)
            self._engine.increment_epoch()

    def acquire(self) -> None:
        with self._lock:
            self._active += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="agent-apps-sandbox-epoch", daemon=True)
                self._thread.start()
            elif self._parked:
                self._cv.notify()

    def release(self) -> None:
        with self._lock:
            self._active -= 1
            self._last_active = time.monotonic()


class _Reaper:
    """Deletes the stores of closed sandboxes on a thread of its own.

    Deleting a store frees its instance (linear memory, tables, stacks): ~0.5 ms, which
    the event loop's thread paid at every sandbox's close. A store handed over here is
    no longer used by anyone (no call is alive in it). The thread starts with the first
    store, and at exit deletes what is queued and stops, before the interpreter is
    finalized (a daemon thread inside wasmtime then could abort the process)."""

    #: Stores waiting for the thread at most; each holds its instance's memory.
    MAX_QUEUED = 1

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[wasmtime.Store | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._stopped = False

    def discard(self, store: wasmtime.Store) -> None:
        """Delete ``store`` soon, off this thread; here, when the caller lets go of it,
        if ``MAX_QUEUED`` wait already (the reaper fell behind: memory stays as it was)
        or after exit began."""
        with self._lock:
            if self._stopped or self._queue.qsize() >= self.MAX_QUEUED:
                return
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="agent-apps-sandbox-reaper", daemon=True)
                self._thread.start()
            self._queue.put(store)

    def _run(self) -> None:
        while True:
            store = self._queue.get()
            if store is None:
                return
            del store  # the last reference: wasmtime deletes it here

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            thread = self._thread
        if thread is not None:
            self._queue.put(None)
            thread.join(timeout=10)


_reaper = _Reaper()
discard = _reaper.discard
atexit.register(_reaper.stop)  # before _core's hook is registered, so it runs after it


class Runtime:
    """Engine + compiled component + linker, shared by all sandboxes."""

    def __init__(self) -> None:
        t0 = time.perf_counter()
        self.engine = new_engine()
        path = _build.build()
        try:
            self.component = Component.deserialize_file(self.engine, str(path))
        except wasmtime.WasmtimeError:
            # A corrupt or foreign artifact: rebuild it once.
            path = _build.build(force=True)
            self.component = Component.deserialize_file(self.engine, str(path))
        self.linker = Linker(self.engine)
        self.linker.add_wasip2()
        self.linker.allow_shadowing = True  # our monotonic clock replaces WASI's
        with self.linker.root() as root:
            with root.add_instance(CLOCK_INTERFACE) as clock:
                for name, func in _CLOCK_FUNCS.items():
                    _check(ffi.wasmtime_component_linker_instance_add_func(
                        clock.ptr(), name, len(name), func, None, _NO_FINALIZER
                    ))
            with root.add_instance(HOST_INTERFACE) as iface:
                poll = ctypes.cast(_poll, ffi.wasmtime_component_func_async_callback_t)
                _check(ffi.wasmtime_component_linker_instance_add_func_async(
                    iface.ptr(), b"poll", 4, poll, None, _NO_FINALIZER
                ))
        self.linker.allow_shadowing = False
        self.ticker = _Ticker(self.engine)
        self.load_seconds = time.perf_counter() - t0


_runtime: Runtime | None = None
_runtime_lock = threading.Lock()


def runtime() -> Runtime:
    """The process-wide runtime, loaded (and built, on first use) on demand."""
    global _runtime
    rt = _runtime
    if rt is None:
        with _runtime_lock:
            if _runtime is None:
                _runtime = Runtime()
            rt = _runtime
    return rt
