"""The guest's report of a run, judged host-side against every limit again.

The runtime writes ``{"value":VALUE,"finished":...,"output":...,"error":...,
"memory":...}`` with the value first, so the value's text can be cut out and judged on
its own (size, depth, NaN) and a refused value still leaves the output and the memory.
A report that fits the value's size limit is parsed whole first (one parse), and judged
in parts only if that fails. A batch (``Sandbox.run_batch``) writes ``{"batch":[REPORT,
...],"memory":...}``, one report per piece of code, each judged the same way. Agent code
can tamper with the runtime, so nothing here trusts it: what does not fit is refused or
cut with a note, never raised.
"""

from __future__ import annotations

import json
from typing import Any

from .._json import MAX_DEPTH
from .._json import loads as _loads
from ._limits import SandboxLimits

__all__ = ["read_report"]

_ENVELOPE_HEAD = '{"value":'
_ENVELOPE_TAIL = ',"finished":'
_BATCH_HEAD = '{"batch":['


def read_report(raw: str, limits: SandboxLimits, calls: int) -> tuple[dict[str, Any], str | None]:
    """The report of a run that made ``calls`` host calls, its fields bounded and typed,
    and the guest's ``memory`` snapshot to keep (None: keep the last one)."""
    return _Reader(limits, calls).read(raw)


class _Reader:
    """One report's reading: the limits it is held to, the memory it leaves."""

    def __init__(self, limits: SandboxLimits, calls: int) -> None:
        self.limits = limits
        self.calls = calls
        self.memory: str | None = None

    def read(self, raw: str) -> tuple[dict[str, Any], str | None]:
        if isinstance(raw, str) and raw.startswith(_BATCH_HEAD):
            return self._batch(raw), self.memory
        return self._envelope(raw), self.memory

    def _envelope(self, raw: str) -> dict[str, Any]:
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

    def _batch(self, raw: str) -> dict[str, Any]:
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
            "value": None, "finished": False, "output": "", "calls": self.calls,
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
        self.memory = mem
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
        return {"value": value, "finished": finished, "output": out, "error": err, "calls": self.calls}

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
