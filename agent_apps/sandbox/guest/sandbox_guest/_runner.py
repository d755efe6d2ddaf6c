"""Runs one piece of agent code and reports it as a JSON envelope.

Agent code is compiled with top-level ``await`` allowed, under the file name
``<agent>``; tracebacks keep only frames of that file, so the model sees its own
lines and none of this runtime. A last bare expression becomes the value (like
a REPL). ``memory`` is the one name that persists
from run to run; after every run it is snapshotted as JSON so the host can
re-seed a fresh instance if this one has to be replaced.
"""

import ast
import asyncio
import builtins
import contextvars
import inspect
import linecache
import re
import sys
import traceback
from json import dumps as _dumps  # bound now: agent code patching json must not break us
from json import loads as _loads
from typing import Any

from . import _blocking, _clock
from ._api import Ctx, Finish, HostError, Target, strict_dumps
from ._loop import Deadlock, GuestLoop, HostStop
from ._output import BoundedOutput

FILENAME = "<agent>"
_VALUE = "__agent_value__"
#: In a batch (several pieces of code run as concurrent tasks): the task's own output
#: and result, so ``print`` and ``ctx.manager.finish`` reach the right piece.
_TASK: contextvars.ContextVar[Any] = contextvars.ContextVar("agent_task", default=None)
_FLAGS = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
_CO_COROUTINE = inspect.CO_COROUTINE
# Frames between the run() export and the agent's module frame when it runs in
# the event loop; added to max_recursion so the agent gets its full depth.
_LOOP_FRAMES = 16
#: How many compiled pieces of code a runtime keeps (see ``Runner._compiled``).
COMPILED_CACHE_SIZE = 64
#: Longer code is compiled every time: a cache entry holds its source and lines.
COMPILED_CACHE_MAX_SOURCE = 64 * 1024


class Runner:
    def __init__(self) -> None:
        self.memory: dict[str, Any] = {}
        self._last_snapshot: str | None = "{}"
        self.output_limit = 64 * 1024
        self.max_recursion = 500
        self.max_payload = 1024 * 1024
        self._loop = GuestLoop()
        asyncio.set_event_loop(self._loop)
        self._ctx = Ctx(self)
        #: The served call in middleware mode (``target`` in agent code), else None.
        self.target: Target | None = None
        self._finished = False
        self._finish_json = "null"
        self._batch: list[tuple[str, Any]] | None = None  # [(code, timeout or None)] of the next run
        #: (file name, source) -> (parts, lines): see ``_compiled``.
        self._compiled_cache: dict[tuple[str, str], tuple[tuple[tuple[Any, str], ...], tuple[str, ...]]] = {}
        _patch_asyncio_run(self)
        _blocking.install(lambda: self._loop)
        _clock.install()

    def reset(self) -> None:
        """Back to the state of a new instance (after the build-time warm-up)."""
        self.memory = {}
        self._last_snapshot = "{}"
        self.target = None
        self._loop = GuestLoop()
        asyncio.set_event_loop(self._loop)
        linecache.cache.pop(FILENAME, None)
        self._compiled_cache.clear()

    # -- setup ---------------------------------------------------------------

    def _setup(self, setup: str) -> None:
        cfg = _loads(setup)
        limits = cfg.get("limits") or {}
        self.output_limit = int(limits.get("output", self.output_limit))
        self.max_recursion = int(limits.get("recursion", self.max_recursion))
        self.max_payload = int(limits.get("payload", self.max_payload))
        _clock.set_clock(cfg.get("clock"))
        batch = cfg.get("batch")
        if isinstance(batch, list):
            timeouts = cfg.get("timeouts") or []
            self._batch = [(str(code), timeouts[i] if i < len(timeouts) else None) for i, code in enumerate(batch)]
        if "memory" in cfg:
            seed = cfg["memory"]
            self.memory = seed if isinstance(seed, dict) else {}
            self._last_snapshot = None  # force a snapshot after the next run
            served = cfg.get("target")
            self.target = None
            if isinstance(served, dict) and isinstance(served.get("args"), dict):
                self.target = Target(self._ctx.manager, str(served.get("skill")), served["args"])

    # -- calls from agent code -------------------------------------------------

    def submit(self, name: str, args_json: str, options_json: str | None = None):
        if len(args_json) > self.max_payload:
            raise ValueError(
                f"ctx.manager.invoke({name!r}) args are too large: {len(args_json) // 1024} KB "
                f"> {self.max_payload // 1024} KB (max_payload_kb)"
            )
        return self._loop.submit(name, args_json, options_json)

    def finish(self, value) -> None:
        try:
            encoded = strict_dumps(value)
        except (TypeError, ValueError) as e:
            raise TypeError(f"ctx.manager.finish() value must be JSON-serializable: {e}") from None
        if len(encoded) > self.max_payload:
            raise ValueError(
                f"ctx.manager.finish() value is too large: {len(encoded) // 1024} KB "
                f"> {self.max_payload // 1024} KB (max_payload_kb)"
            )
        task = _TASK.get()
        if task is not None:
            task.finished, task.finish_json = True, encoded
            raise Finish()
        self._finished = True
        self._finish_json = encoded
        raise Finish()

    # -- the run export ------------------------------------------------------------

    def run(self, code: str, setup: str) -> str:
        if setup:
            self._setup(setup)
        if self._batch is not None:
            batch, self._batch = self._batch, None
            return self._run_batch(batch)
        out = BoundedOutput(self.output_limit)
        saved = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = out
        self._finished = False
        self._finish_json = "null"
        value_json = "null"
        error = None
        notes = []
        ns = None
        try:
            try:
                parts = self._compiled(code, FILENAME)
            except (SyntaxError, ValueError) as e:
                error = _format_error(e)
            else:
                ns = self._namespace()
                sys.setrecursionlimit(_depth() + _LOOP_FRAMES + self.max_recursion)
                try:
                    value_json = self._encode_value(self._execute(parts, ns))
                except Finish:
                    pass
                except HostStop as e:
                    error = str(e)
                    self._loop = GuestLoop()
                    asyncio.set_event_loop(self._loop)
                except Deadlock as e:
                    error = f"RuntimeError: {e}"
                    self._loop = GuestLoop()
                    asyncio.set_event_loop(self._loop)
                except BaseException as e:
                    error = _format_error(e)
                left = self._loop.pending_calls()
                if left:
                    notes.append(
                        f"[note: {left} ctx.manager.invoke() call(s) were still pending when the run "
                        "ended and were cancelled; did you forget `await`?]"
                    )
                    self._loop.abandon()
        finally:
            sys.stdout, sys.stderr = saved
        if self._finished:
            value_json = self._finish_json
            error = None
        if ns is not None:
            rebound = ns.get("memory")
            if isinstance(rebound, dict) and rebound is not self.memory:
                self.memory = rebound
        snapshot, memory_note = self._snapshot()
        if memory_note:
            notes.append(memory_note)
        if snapshot == self._last_snapshot:
            snapshot = None
        else:
            self._last_snapshot = snapshot
        output = out.getvalue()
        if notes:
            output = (output + "\n" if output and not output.endswith("\n") else output) + "\n".join(notes)
        if error is not None and len(error) > self.output_limit:
            error = error[: self.output_limit] + "\n[error message truncated]"
        return (
            '{"value":' + value_json
            + ',"finished":' + ("true" if self._finished else "false")
            + ',"output":' + _text_json(output)
            + ',"error":' + _text_json(error)
            + ',"memory":' + _text_json(snapshot)
            + "}"
        )

    def _run_batch(self, batch) -> str:
        """Run several pieces of code as concurrent tasks on this runtime's event loop
        (the calls one model turn makes at once): each has its own output, value, error
        and ``finish()``, and its own time limit; they share ``memory``."""
        tasks = [_Task(self.output_limit) for _ in batch]
        saved = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = _TaskOutput(tasks[0].out if tasks else BoundedOutput(0))
        loop = self._loop
        running: list[Any] = []
        stopped: str | None = None
        try:
            for index, ((code, timeout), task) in enumerate(zip(batch, tasks, strict=True)):
                try:
                    parts = self._compiled(code, f"<agent {index + 1}>")
                except (SyntaxError, ValueError) as e:
                    task.error = _format_error(e)
                    continue
                ns = self._namespace()
                context = contextvars.copy_context()
                context.run(_TASK.set, task)
                task.future = loop.create_task(_main(parts, ns), context=context)
                task.ns = ns
                if timeout:
                    loop.call_later(float(timeout), task.expire, float(timeout))
                running.append(task.future)
            sys.setrecursionlimit(_depth() + _LOOP_FRAMES + self.max_recursion)
            if running:
                try:
                    self.run_awaitable(asyncio.gather(*running, return_exceptions=True))
                except (HostStop, Deadlock) as e:
                    stopped = str(e) if isinstance(e, HostStop) else f"RuntimeError: {e}"
                    self._loop = GuestLoop()
                    asyncio.set_event_loop(self._loop)
        finally:
            sys.stdout, sys.stderr = saved
        for task in tasks:
            task.settle(self, stopped)
            rebound = task.ns.get("memory") if task.ns is not None else None
            if isinstance(rebound, dict) and rebound is not self.memory:
                self.memory = rebound
        snapshot, memory_note = self._snapshot()
        if memory_note and tasks:
            tasks[-1].out.write("\n" + memory_note)
        if snapshot == self._last_snapshot:
            snapshot = None
        else:
            self._last_snapshot = snapshot
        results = ",".join(task.envelope() for task in tasks)
        return '{"batch":[' + results + '],"memory":' + _text_json(snapshot) + "}"

    def _compiled(self, code: str, filename: str):
        """``_compile(code, filename)``, from a cache when this runtime compiled the same
        source under the same name before, and the source's lines put where tracebacks
        read them (``linecache``).

        The same agent code often runs again in one sandbox (a loop of turns, a retried
        call), and compiling is half the runtime's own work in a short run. What is kept
        carries nothing of the run that compiled it: code objects are immutable and hold
        no globals (each run executes them in a fresh namespace), and ``linecache`` gets
        a new list of the lines each time. The cache lives in this instance only, and
        ``reset`` empties it."""
        key = (filename, code)
        entry = self._compiled_cache.pop(key, None)
        if entry is None:
            lines = code.splitlines(True)
            linecache.cache[filename] = (len(code), None, lines, filename)
            entry = (tuple(_compile(code, filename)), tuple(lines))  # a SyntaxError is never cached
            if len(code) > COMPILED_CACHE_MAX_SOURCE:
                return entry[0]
            if len(self._compiled_cache) >= COMPILED_CACHE_SIZE:
                del self._compiled_cache[next(iter(self._compiled_cache))]  # the least recently used
        else:
            linecache.cache[filename] = (len(code), None, list(entry[1]), filename)
        self._compiled_cache[key] = entry  # last: the most recently used
        return entry[0]

    def _namespace(self):
        return {
            "__name__": "__main__",
            "__builtins__": builtins,
            "ctx": self._ctx,
            "memory": self.memory,
            "target": self.target,
            "asyncio": asyncio,
            "HostError": HostError,
        }

    def _execute(self, parts, ns):
        if not any(code.co_flags & _CO_COROUTINE for code, _ in parts):
            value = None
            for code, mode in parts:
                result = eval(code, ns)
                if mode == "expr":
                    value = result
                elif mode == "assigned":
                    value = ns.pop(_VALUE, None)
            if inspect.isawaitable(value):
                return self.run_awaitable(value)
            return value
        return self.run_awaitable(_main(parts, ns))

    def run_awaitable(self, aw):
        loop = self._loop
        if loop.is_running():
            raise RuntimeError(
                "asyncio.run() cannot be called here: agent code already runs in an event loop; "
                "use `await` (top-level await works)"
            )
        task = asyncio.ensure_future(aw, loop=loop)
        stopped = False
        try:
            return loop.run_until_complete(task)
        except (HostStop, Deadlock):
            stopped = True  # the host said stop: run no more agent code
            raise
        finally:
            if not stopped:
                if not task.done():
                    task.cancel()
                self._cancel_leftovers(loop)

    def _cancel_leftovers(self, loop) -> None:
        tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
        if not tasks or loop.is_running():
            return
        for t in tasks:
            t.cancel()
        try:
            loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        except (HostStop, Deadlock):
            raise
        except BaseException:
            pass

    def _encode_value(self, value) -> str:
        if value is None:
            return "null"
        try:
            # A str or an int (the commonest values) is encoded as the encoder would,
            # without building one (~4 us in the guest).
            kind = type(value)
            if kind is str:
                encoded = _dumps(value)
            elif kind is int:
                encoded = int.__repr__(value)
            else:
                encoded = strict_dumps(value)
        except (TypeError, ValueError, RecursionError):
            try:
                text = repr(value)
            except Exception as e:  # a hostile __repr__
                text = f"<unrepresentable {type(value).__name__}: {type(e).__name__}>"
            encoded = _dumps(text[: self.max_payload])
        if len(encoded) > self.max_payload:
            raise ValueError(
                f"the value of the last expression is too large: {len(encoded) // 1024} KB "
                f"> {self.max_payload // 1024} KB (max_payload_kb); return less, or print a summary"
            )
        return encoded

    def _snapshot(self):
        if type(self.memory) is dict and not self.memory:
            return "{}", None
        try:
            return _dumps(self.memory), None
        except (TypeError, ValueError, RecursionError):
            pass
        kept, skipped = {}, []
        for key, value in list(self.memory.items()):
            try:
                if not isinstance(key, str):
                    raise TypeError("key is not a str")
                _dumps(value)
                kept[key] = value
            except (TypeError, ValueError, RecursionError):
                skipped.append(repr(key))
        note = (
            f"[note: memory[{', '.join(skipped)}] is not JSON-serializable, so it was not saved; "
            "it stays available in this sandbox but would be lost if the sandbox is reset]"
        )
        return _dumps(kept), note


class _Task:
    """One piece of code of a batch: its output and what it ended with."""

    def __init__(self, output_limit: int) -> None:
        self.out = BoundedOutput(output_limit)
        self.future: Any = None
        self.ns: dict[str, Any] | None = None
        self.error: str | None = None
        self.value_json = "null"
        self.finished = False
        self.finish_json = "null"
        self.timed_out: float | None = None

    def expire(self, seconds: float) -> None:
        if self.future is not None and not self.future.done():
            self.timed_out = seconds
            self.future.cancel()

    def settle(self, runner: Runner, stopped) -> None:
        future = self.future
        if self.error is not None or future is None:
            return
        if stopped is not None and not future.done():
            self.error = stopped
        elif self.timed_out is not None:
            self.error = (
                f"TimeoutError: this call ran longer than its time limit of {self.timed_out:g} s "
                "(tool_timeout) and was stopped"
            )
        elif future.cancelled():
            self.error = "CancelledError: the call was cancelled"
        elif isinstance(future.exception(), Finish):
            pass
        elif future.exception() is not None:
            self.error = _format_error(future.exception())
        else:
            try:
                self.value_json = runner._encode_value(future.result())
            except BaseException as e:
                self.error = _format_error(e)
        if self.finished:
            self.error = None

    def envelope(self) -> str:
        return (
            '{"value":' + (self.finish_json if self.finished else self.value_json)
            + ',"finished":' + ("true" if self.finished else "false")
            + ',"output":' + _text_json(self.out.getvalue())
            + ',"error":' + _text_json(self.error)
            + "}"
        )


class _TaskOutput:
    """``sys.stdout`` during a batch: writes go to the output of the task writing."""

    def __init__(self, default: BoundedOutput) -> None:
        self._default = default

    def write(self, s) -> int:
        task = _TASK.get()
        return (task.out if task is not None else self._default).write(s)

    def flush(self) -> None:
        pass

    def writable(self) -> bool:
        return True


def _text_json(text) -> str:
    """JSON of a str or None, the envelope's text fields: most are empty or None,
    which need no encoder call (~4 us each in the guest)."""
    return "null" if text is None else '""' if text == "" else _dumps(text)


async def _main(parts, ns):
    value = None
    for code, mode in parts:
        result = eval(code, ns)
        if code.co_flags & _CO_COROUTINE:
            result = await result
        if mode == "expr":
            value = result
        elif mode == "assigned":
            value = ns.pop(_VALUE, None)
    if inspect.isawaitable(value):
        value = await value
    return value


_BLOCK = re.compile(r"(?:async\s+)?(?:for|while|if|elif|else|with|def|class|try|except|finally|match)\b.*:\s*(?:#.*)?$")
_SIMPLE = re.compile(r"(?:import|from|return|pass|raise|del|assert|global|nonlocal|break|continue)\b")


def _compile(code: str, filename: str = FILENAME):
    """Compile agent code into parts [(code object, mode)], mode "stmt", "expr" or "assigned".

    The value of a last bare expression is wanted, which needs to know where the
    last top-level statement starts. Fast path (about half the cost of a round trip
    through ``ast``): the last statement starts at the last line that begins in
    column 0; compile the text before it as statements and it alone as an
    expression (padded with newlines so line numbers stay right), or, when it is not
    an expression (an assignment, the commonest last line), as a statement. Both
    must compile, so a wrong guess (a column-0 line inside brackets or a string)
    just falls back to the ``ast`` path, which is always right. A last statement
    with a ``;`` takes that path too: an expression may follow the ``;``.
    """
    lines = code.splitlines(True)
    j = len(lines) - 1
    while j >= 0 and (not lines[j].strip() or lines[j][0] in " \t#\f"):
        j -= 1
    if j < 0:
        return [(compile(code, filename, "exec", flags=_FLAGS), "stmt")]
    first = lines[j]
    if _SIMPLE.match(first) or _BLOCK.match(first.rstrip("\r\n")):
        try:
            return [(compile(code, filename, "exec", flags=_FLAGS), "stmt")]
        except SyntaxError:
            pass
    else:
        tail = "\n" * j + "".join(lines[j:])
        try:
            last, mode = compile(tail, filename, "eval", flags=_FLAGS), "expr"
        except SyntaxError:
            if ";" in tail:
                return _compile_ast(code, filename)
            try:
                last, mode = compile(tail, filename, "exec", flags=_FLAGS), "stmt"
            except SyntaxError:
                return _compile_ast(code, filename)
        if j == 0:
            return [(last, mode)]
        try:
            return [(compile("".join(lines[:j]), filename, "exec", flags=_FLAGS), "stmt"), (last, mode)]
        except SyntaxError:
            pass
    return _compile_ast(code, filename)


def _compile_ast(code: str, filename: str = FILENAME):
    """The general path: a last bare expression becomes an assignment to _VALUE
    (same line numbers, so tracebacks still point at the agent's line)."""
    tree = ast.parse(code, filename, "exec")
    has_value = bool(tree.body) and isinstance(tree.body[-1], ast.Expr)
    if has_value:
        expr = tree.body[-1]
        assert isinstance(expr, ast.Expr)
        target = ast.Name(_VALUE, ast.Store())
        tree.body[-1] = ast.copy_location(ast.Assign([ast.copy_location(target, expr)], expr.value), expr)
    return [(compile(tree, filename, "exec", flags=_FLAGS), "assigned" if has_value else "stmt")]


def _depth() -> int:
    frame: Any = sys._getframe()
    n = 0
    while frame is not None:
        frame, n = frame.f_back, n + 1
    return n


def _trim(te, seen) -> None:
    """Keep only the agent's own frames, in the exception and its chain."""
    if te is None or id(te) in seen:
        return
    seen.add(id(te))
    te.stack = traceback.StackSummary.from_list([f for f in te.stack if f.filename.startswith("<agent")])
    _trim(te.__cause__, seen)
    _trim(te.__context__, seen)
    for sub in getattr(te, "exceptions", None) or ():
        _trim(sub, seen)


def _format_error(exc: BaseException) -> str:
    try:
        te = traceback.TracebackException.from_exception(exc)
        _trim(te, set())
        return "".join(te.format()).rstrip("\n")
    except BaseException as e:  # a hostile __str__ must not break reporting
        return f"{type(exc).__name__} (could not be formatted: {type(e).__name__})"


def _patch_asyncio_run(runner: Runner) -> None:
    """Make ``asyncio.run(main())`` (a habit of many models) run on our loop."""

    def run(main, *, debug=None, loop_factory=None):
        return runner.run_awaitable(main)

    run.__doc__ = asyncio.run.__doc__
    asyncio.run = run
