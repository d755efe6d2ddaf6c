"""Where a host call from agent code goes, counted: Python calls per call, by layer.

    python benchmarks/bench_call_layers.py

The run of ``bench_run.py``: a prompt skill on the scripted provider whose code calls a
no-op skill 300 times, journal on. cProfile counts the Python calls on the event loop's
thread in three such runs and in three one-turn runs; per host call is the difference
over 900. Each Python function's calls count in its module's layer, each builtin's in
its caller's. Counts do not depend on the machine's load; times do.
"""

from __future__ import annotations

import collections
import tempfile
from pathlib import Path

from bench_run import CALLS, NOOP, call_us, profiled, run_ms, write_skill

from agent_apps import ContextManager

#: A module (a part of its file's path) and the layer its calls count in, first match.
LAYERS = [
    ("_json.py", "JSON: the request's parse, the guest's answer, the report's args and result"),
    ("json/", "JSON: the request's parse, the guest's answer, the report's args and result"),
    ("sandbox/", "sandbox: the poll crossing, each call judged, the call's task"),
    ("asyncio/", "sandbox: the poll crossing, each call judged, the call's task"),
    ("_weakrefset", "sandbox: the poll crossing, each call judged, the call's task"),
    ("ctypes", "sandbox: the poll crossing, each call judged, the call's task"),
    ("gateway.py", "gateway"),
    ("admission.py", "gateway"),
    ("stopping.py", "gateway"),
    ("recorder.py", "report entry"),
    ("content.py", "report entry"),
    ("durable.py", "journal entry"),
    ("tools/middleware.py", "pipeline: permission middleware"),
    ("policy.py", "pipeline: permission middleware"),
    ("approval.py", "pipeline: permission middleware"),
    ("settings.py", "pipeline: permission middleware"),
    ("config.py", "pipeline: permission middleware"),
    ("validation.py", "pipeline: JSON checks of args and result"),
    ("_simple_schema.py", "pipeline: JSON checks of args and result"),
    ("manager.py", "pipeline: resolve, allowed-tools, onion"),
    ("allowed_tools.py", "pipeline: resolve, allowed-tools, onion"),
    ("skill.py", "pipeline: resolve, allowed-tools, onion"),
    ("", "pipeline: invoke, its context, the skill"),  # pipeline.py, context.py, tracing.py, the skill
]


def layer(file: str) -> str:
    return next(name for part, name in LAYERS if part in file)


def by_layer(stats: object) -> collections.Counter[str]:
    counts: collections.Counter[str] = collections.Counter()
    for (file, _, _), (_, calls, _, _, callers) in stats.stats.items():  # type: ignore[attr-defined]
        if file == "~":  # a builtin: its caller's layer
            for (caller, _, _), (_, by_caller, *_) in callers.items():
                counts[layer(caller)] += by_caller
        else:
            counts[layer(file)] += calls
    return counts


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "noop.skill.py").write_text(NOOP)
        write_skill(root, "calls", CALLS)
        write_skill(root, "once", "ctx.manager.finish(1)")
        cm = ContextManager([root], cwd=root, home=root / "home", env=False, project=False, user=False,
                            entry_points=False)
        run_ms(cm, runs=3)
        call_us(cm, "calls")
        once = by_layer(profiled(lambda: run_ms(cm, runs=3)))
        calls = by_layer(profiled(lambda: [call_us(cm, "calls") for _ in range(3)]))
        cm.state.close()
    rows = sorted(((calls[name] - once[name]) / 900, name) for name in calls)
    for count, name in reversed(rows):
        if count >= 0.5:
            print(f"{count:6.1f}  {name}")
    print(f"{sum(count for count, _ in rows):6.1f}  in all")


if __name__ == "__main__":
    main()
