"""What the SQLite store costs per call, in CPU instructions (valgrind's callgrind): a
count that does not depend on what else the machine is doing, so two versions can be
compared on a busy machine where timings cannot.

    python benchmarks/bench_sqlite_instructions.py [CHECKOUT ...]

For each checkout (default: this one) it runs the store under callgrind with a few and
with more calls, and prints the difference per call: appending one message, and reading
the history of a 10,000-message session (what the prompt window starts from, decoded).
Python's start and the store's opening cancel out. Needs ``valgrind``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

#: Run inside callgrind: ``WHAT N`` calls on a new store.
WORK = """
import sys, tempfile
from pathlib import Path
from agent_apps.state import StateStore
what, n = sys.argv[1], int(sys.argv[2])
store = StateStore(Path(tempfile.mkdtemp()) / "s.db")
message = {"role": "assistant", "text": "The values hold steady at 42 over the whole period. " * 3}
store.sessions.append("s", [message])
if what == "append":
    for _ in range(n):
        store.sessions.append("s", [message])
else:
    for _ in range(2500):
        store.sessions.append("s", [message] * 4)
    for _ in range(n):
        store.sessions.history("s").messages()
"""
#: (what, fewer calls, more calls)
CASES = (("append", 1000, 3000), ("history", 2, 6))


def instructions(checkout: Path, what: str, n: int) -> int:
    env = {**os.environ, "PYTHONPATH": str(checkout), "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0"}
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-c", WORK, what, str(n)],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    match = re.search(r"Collected : (\d+)", done.stderr)
    assert match, done.stderr[-2000:]
    return int(match[1])


def main() -> None:
    checkouts = [Path(p).resolve() for p in sys.argv[1:]] or [Path(__file__).resolve().parent.parent]
    for checkout in checkouts:
        for what, few, many in CASES:
            per_call = (instructions(checkout, what, many) - instructions(checkout, what, few)) / (many - few)
            label = "append one message" if what == "append" else "history of 10,000 messages, decoded"
            print(f"{checkout}  {label:<38} {per_call:>14,.0f} instructions a call")


if __name__ == "__main__":
    main()
