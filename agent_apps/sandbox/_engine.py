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

import ctypes
import threading
import time
from collections.abc import Callable
from typing import Any

try:
    import wasmtime
    from wasmtime import Config, Engine
    from wasmtime import _ffi as ffi
    from wasmtime.component import Component, Linker, Variant, _enter
except ImportError as exc:  # pragma: no cover - depends on the install
    from ..errors import SandboxError

    raise SandboxError(
        "the sandbox needs wasmtime and componentize-py: pip install 'agent-apps[sandbox]'"
    ) from exc

from . import _build

TICK = 0.01
HOST_INTERFACE = "agent-apps:sandbox/host@0.1.0"
_FINALIZER_T = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def engine_config() -> Config:
    """Engine settings; they are part of the cache key (``_build.ENGINE_SETTINGS``)."""
    cfg = Config()
    cfg.epoch_interruption = True
    return cfg


def new_engine() -> Engine:
    return Engine(engine_config())


# -- the host import, dispatched to the sandbox that owns the calling thread ----------

_tls = threading.local()


def _poll(store: Any, batch: str, timeout_ms: int) -> Variant:
    core = getattr(_tls, "core", None)
    if core is None:  # cannot happen: wasm only runs on sandbox worker threads
        return Variant("err", "SandboxError: no sandbox on this thread")
    try:
        return core.poll(batch, timeout_ms)
    except BaseException as e:  # never let a Python exception trap the guest by accident
        return Variant("err", f"SandboxError: host failure in poll: {type(e).__name__}: {e}")


# -- a lean path across the boundary --------------------------------------------------
#
# wasmtime-py's generic component glue rebuilds the function's type from C on every
# call and converts values through a tree of Python objects: ~25 us per crossing here,
# as much as the guest's own work for a host call. The ``run`` export carries only
# strings, so it is called with the same C API calls, marshalled by hand. The ``poll``
# import stays on wasmtime-py's glue: a hand-made ctypes callback there was faster but
# crashed the process at exit when a worker abandoned in a blocking wait (see the
# stuck-worker cap) came back into Python during interpreter shutdown.

_STRING = ffi.WASMTIME_COMPONENT_STRING.value
_Val = ffi.wasmtime_component_val_t
_U8P = ctypes.POINTER(ctypes.c_uint8)


def _str_val(text: str) -> Any:
    """A component string value (owned by whoever receives it)."""
    val = _Val()
    val.kind = _STRING
    data = text.encode()
    ffi.wasm_byte_vec_new(ctypes.byref(val.of.string), len(data), ctypes.cast(ctypes.c_char_p(data), _U8P))
    return val


def _take_str(val: Any) -> str:
    """The text of a component string value; frees the value's bytes."""
    vec = val.of.string
    text = ctypes.string_at(vec.data, vec.size).decode() if vec.size else ""
    ffi.wasm_byte_vec_delete(ctypes.byref(vec))
    return text


class StringFunc:
    """Calls an export whose parameters and result are all strings, without
    wasmtime-py's generic conversion (see above); raises what ``Func.__call__`` raises."""

    def __init__(self, func: Any) -> None:
        self._func = func._func

    def __call__(self, store: wasmtime.Store, *texts: str) -> str:
        params = (_Val * len(texts))(*(_str_val(t) for t in texts))
        result = _Val()
        try:
            err = ffi.wasmtime_component_func_call(
                ctypes.byref(self._func), store._context(), params, len(texts), ctypes.byref(result), 1
            )
        finally:
            for i in range(len(texts)):
                ffi.wasmtime_component_val_delete(ctypes.byref(params[i]))
        if err:
            error = wasmtime.WasmtimeError._from_ptr(err)
            _enter.maybe_raise_last_exn()
            raise error
        if result.kind != _STRING:  # cannot happen with our WIT world
            ffi.wasmtime_component_val_delete(ctypes.byref(result))
            raise wasmtime.WasmtimeError("the sandbox export returned a non-string")
        return _take_str(result)


def bind_thread(core: Any) -> None:
    """Route ``poll`` calls made on this thread to ``core``."""
    _tls.core = core


# -- epoch deadline callback ---------------------------------------------------------

_DEADLINE_CB_T = ctypes.CFUNCTYPE(
    ctypes.c_size_t,
    ctypes.POINTER(ffi.wasmtime_context_t),
    ctypes.c_void_p,
    ctypes.POINTER(ctypes.c_uint64),
    ctypes.POINTER(ffi.wasmtime_update_deadline_kind_t),
)
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
    kind[0] = 0  # WASMTIME_UPDATE_DEADLINE_CONTINUE
    return 0


@_FINALIZER_T
def _finalize(data):  # type: ignore[no-untyped-def]
    _deadline_owners.pop(data or 0, None)


def watch_deadline(store: wasmtime.Store, check: Callable[[], str | None]) -> None:
    """Call ``check`` on every epoch tick while ``store`` runs wasm; a returned
    string traps the guest with that message."""
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
        self._cv = threading.Condition()
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
        with self._cv:
            self._active += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="agent-apps-sandbox-epoch", daemon=True)
                self._thread.start()
            elif self._parked:
                self._cv.notify()

    def release(self) -> None:
        with self._cv:
            self._active -= 1
            self._last_active = time.monotonic()


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
        with self.linker.root() as root:
            with root.add_instance(HOST_INTERFACE) as iface:
                iface.add_func("poll", _poll)
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
