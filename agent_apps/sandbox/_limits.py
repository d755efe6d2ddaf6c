"""The sandbox's limits and the result of one run (plain data, no wasmtime)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SandboxLimits:
    """Per-sandbox limits; each one, when hit, gives the model a clear message.

    - ``timeout``: wall-clock seconds per run (epoch interruption + wall clock).
    - ``memory_mb``: the guest's linear memory (CPython's whole heap).
    - ``output_kb``: ``print`` output kept per run (in thousands of characters);
      the rest is dropped with a notice.
    - ``max_calls``: ``ctx.manager.invoke`` calls per run.
    - ``max_payload_kb``: size of the JSON of each call's args, each call's
      result, and the run's value.
    - ``max_recursion``: Python call depth available to agent code.
    """

    timeout: float = 30.0
    memory_mb: int = 256
    output_kb: int = 64
    max_calls: int = 1000
    max_payload_kb: int = 1024
    max_recursion: int = 500

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
                raise ValueError(f"SandboxLimits.{f.name} must be a positive number, got {v!r}")
        if self.memory_mb < 64:
            raise ValueError(f"SandboxLimits.memory_mb must be at least 64 (CPython needs it), got {self.memory_mb}")
        if self.max_recursion < 20:
            raise ValueError(f"SandboxLimits.max_recursion must be at least 20, got {self.max_recursion}")

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | None) -> SandboxLimits:
        """Build limits from the ``sandbox`` section of a model config.

        Unknown keys raise ``ValueError`` naming them (a typo must not silently
        leave a limit at its default).
        """
        if not config:
            return DEFAULT_LIMITS
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(config) - names)
        if unknown:
            raise ValueError(f"unknown sandbox limit(s): {', '.join(unknown)} (known: {', '.join(sorted(names))})")
        return cls(**dict(config))

    def replace(self, **changes: Any) -> SandboxLimits:
        return dataclasses.replace(self, **changes)


#: The default limits, one shared instance (they are frozen): a sandbox handed out with
#: them skips building them (~10 us of a pooled sandbox's first result).
DEFAULT_LIMITS = SandboxLimits()


@dataclass
class RunResult:
    """What one ``Sandbox.run`` produced.

    ``value`` is the value given to ``ctx.manager.finish`` (then ``finished`` is
    true) or else the value of the code's last bare expression (its ``repr`` if
    it is not JSON-serializable). ``error`` is the exception with a traceback
    trimmed to the agent's own lines. ``replaced`` is true when the instance
    trapped (time limit, memory, stack, crash) and was replaced by a fresh one;
    ``notice`` then says so in words meant for the model.
    """

    value: Any = None
    finished: bool = False
    output: str = ""
    error: str | None = None
    replaced: bool = False
    notice: str | None = None
    calls: int = 0
    duration: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_json(self) -> dict[str, Any]:
        return {
            k: v
            for k, v in dataclasses.asdict(self).items()
            if v not in (None, "", False) or k in ("value", "finished")
        }

    def for_model(self) -> str:
        """A plain-text rendering for the model's tool result."""
        import json

        parts: list[str] = []
        if self.output:
            parts.append(self.output.rstrip("\n"))
        if self.error:
            parts.append(self.error)
        elif self.value is not None:
            v = self.value if isinstance(self.value, str) else json.dumps(self.value, ensure_ascii=False)
            parts.append(("finished with: " if self.finished else "") + v)
        elif self.finished:
            parts.append("finished")
        if self.notice:
            parts.append(f"[{self.notice}]")
        return "\n".join(parts) if parts else "(no output)"


