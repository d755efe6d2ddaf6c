"""What the bounds on untrusted input cost: validation, JSON from agent code, skill files.

    python benchmarks/bench_untrusted.py

Each row compares the bounded path agent-apps takes with the unbounded one it
replaced (plain jsonschema with Python's ``re``, plain ``json.loads``, a skill file
loaded without the YAML event walk), on the same input. Hostile inputs are shown only on the bounded side: the
unbounded side of those never finishes (or takes minutes).
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from agent_apps import _json, _schema
from agent_apps.loading import load_file

PARAMS = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "minLength": 1, "maxLength": 4096},
        "content": {"type": "string"},
        "append": {"type": "boolean", "default": False},
        "name": {"type": "string", "pattern": "^[a-z0-9-]+$"},
    },
    "required": ["path", "content"],
    "additionalProperties": False,
}
ARGS = {"path": "notes/a.txt", "content": "hello " * 20, "append": True, "name": "word-count"}


def per_call_us(fn: Callable[[], Any], runs: int = 2000) -> float:
    samples = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(runs):
            fn()
        samples.append((time.perf_counter() - start) / runs * 1e6)
    return statistics.median(samples)


def once_ms(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def main() -> None:
    rows: list[tuple[str, str, str]] = []
    plain = Draft202012Validator(PARAMS, format_checker=Draft202012Validator.FORMAT_CHECKER)
    bounded = _schema.validator_for(PARAMS)
    rows.append((
        "validate typical args (a pattern, 4 keys)",
        f"{per_call_us(lambda: _schema.first_error(bounded, ARGS)):.1f} us",
        f"{per_call_us(lambda: next(plain.iter_errors(ARGS), None)):.1f} us",
    ))
    items = [{"a": i} for i in range(2000)]
    unique = {"type": "array", "uniqueItems": True}
    rows.append((
        "uniqueItems, 2,000 objects",
        f"{once_ms(lambda: _schema.first_error(_schema.validator_for(unique), items)):.1f} ms",
        f"{once_ms(lambda: next(Draft202012Validator(unique).iter_errors(items), None)):.1f} ms",
    ))
    hostile = {"type": "string", "pattern": "^(a|aa)+$"}
    rows.append((
        "pattern ^(a|aa)+$ on 'a' * 60 + '!'",
        f"{once_ms(lambda: _schema.first_error(_schema.validator_for(hostile), 'a' * 60 + '!')):.2f} ms",
        "does not finish",
    ))
    payload = json.dumps({"calls": [[1, "file-write", {"path": "a", "content": "x" * 100_000, "n": 1.5}]]})
    rows.append((
        "parse a 100 KB call batch",
        f"{per_call_us(lambda: _json.loads(payload), 200):.0f} us",
        f"{per_call_us(lambda: json.loads(payload), 200):.0f} us",
    ))
    wide = json.dumps([{"k": [i, i + 1], "v": "x"} for i in range(5000)])
    rows.append((
        "parse 5,000 small objects (depth measured)",
        f"{per_call_us(lambda: _json.loads(wide), 50):.0f} us",
        f"{per_call_us(lambda: json.loads(wide), 50):.0f} us",
    ))
    with tempfile.TemporaryDirectory() as tmp:
        skill = Path(tmp) / "skill" / "SKILL.md"
        skill.parent.mkdir()
        skill.write_text(
            "---\nname: skill\ndescription: A prompt skill.\nmetadata:\n  tags: [a, b]\n"
            "  model: {agent: agent-scripted, max_turns: 3}\n  returns: {type: object, properties: "
            "{count: {type: integer}}}\n---\nDo it.\n"
        )
        from agent_apps import loading

        bounded_us = per_call_us(lambda: load_file(skill, origin="path"), 500)
        check, loading._check_yaml_shape = loading._check_yaml_shape, lambda *a: None
        try:
            unbounded_us = per_call_us(lambda: load_file(skill, origin="path"), 500)
        finally:
            loading._check_yaml_shape = check
        shown = (f"{bounded_us:.0f} us", f"{unbounded_us:.0f} us")
        rows.append(("load a SKILL.md (with / without the event walk)", *shown))
    width = max(len(r[0]) for r in rows)
    print(f"{'':{width}}  {'bounded':>12}  {'unbounded':>16}")
    for name, ours, theirs in rows:
        print(f"{name:{width}}  {ours:>12}  {theirs:>16}")


if __name__ == "__main__":
    main()
