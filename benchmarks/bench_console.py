"""The console: the runs page over 10,000 runs, a run of 200 turns, and live updates.

    python benchmarks/bench_console.py [--runs 3]

Serves a store with ``agent-apps console`` (a real process) and prints, per run of the
benchmark, the server time of each page (the console's ``Server-Timing`` header: from
the request to the answer's start, store reads and rendering included) and how long a
live event takes to reach an open page in Chromium: from the moment the agent's hook
hears the model's text (the ``agent-message`` event's timestamp) to the moment the
page's DOM shows it (a MutationObserver's clock; one machine, one clock).
Targets: the runs page (paginated) <= 300 ms; a run of 200 turns <= 500 ms; a live
event on the page <= 200 ms.
"""

from __future__ import annotations

import argparse
import http.client
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from agent_apps import ContextManager
from agent_apps.run_record import RunRecord
from agent_apps.state import StateStore

CHROMIUM = os.environ.get("AGENT_APPS_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]  # fmt: skip
CODE = "rows = await ctx.manager.invoke('file-read', {'path': 'data.csv'})\nprint(len(rows.splitlines()))"


def fill(store: StateStore, runs: int) -> None:
    """``runs`` finished runs (a few waiting for approval), each with a report of three
    turns of text, code and a host call, as the recorder writes them."""
    rng = random.Random(7)
    names = [f"skill-{n}" for n in range(12)]
    for n in range(runs):
        record = RunRecord.new().child(session_id=f"s{n % 40}" if n % 3 == 0 else None)
        store.runs.start_agent(record, name=rng.choice(names))
        steps = []
        for turn in range(3):
            call = {"id": f"c{turn}", "tool": "invoke", "args": {"code": CODE}, "latency_ms": 12.5, "result": "61",
                    "result_size": 2, "error": None, "skills": ["file-read"],
                    "host_calls": [{"id": f"c{turn}.1", "skill": "file-read", "status": "ok", "latency_ms": 3.1,
                                    "args": {"path": "data.csv"}, "result": "date,value\n" * 20}]}  # fmt: skip
            steps.append({"index": turn, "turn": turn + 1, "text": "Reading the data. " * 5, "tool_calls": [call],
                          "usage": {"input_tokens": 900, "output_tokens": 60}, "model_latency_ms": 800})  # fmt: skip
        report = {"steps": steps, "usage": {"input_tokens": 2700, "output_tokens": 180}, "cost_usd": 0.0036}
        status = "waiting-approval" if n % 997 == 0 else rng.choice(["done"] * 8 + ["error", "max_turns"])
        store.runs.finish_agent(record, status=status, report=report)


def long_run(root: Path, store_path: Path, turns: int) -> str:
    """A real agent run of ``turns`` turns (scripted model, real sandbox), each with text,
    code and a host call; returns its id."""
    skills = root / "skills"
    skills.mkdir(exist_ok=True)
    (skills / "lookup.skill.py").write_text(
        'frontmatter = {"description": "Looks up.", "params": {"type": "object"}}\n'
        "async def main(ctx, args):\n    return {'found': args, 'rows': list(range(20))}\n"
    )
    cm = ContextManager(search_path=[skills], cwd=root, home=root / "home", state=str(store_path), env=False,
                        project=False, user=False)  # fmt: skip
    script = [
        {"text": f"Step {n}: looking up the next item.", "usage": {"input_tokens": 1000 + n, "output_tokens": 40},
         "code": f"r = await ctx.manager.invoke('lookup', {{'n': {n}}})\nfor row in r['rows'][:3]:\n    print(row)"}
        for n in range(turns - 1)
    ] + [{"text": "All done."}]  # fmt: skip
    config = {"agent": "agent-scripted", "script": script, "max_turns": turns + 5, "max_steps": turns + 5}
    cm.invoke_sync("agent", {"prompt": "P", "name": "long", "config": config})
    return cm.state.runs.list(limit=1)[0].id


class Console:
    """``agent-apps console`` on a store, as a real process."""

    def __init__(self, store_path: Path) -> None:
        env = {**os.environ, "AGENT_APPS_STATE": str(store_path)}
        command = [sys.executable, "-m", "agent_apps", "console", "--port", "0"]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
        line = self.process.stdout.readline()  # type: ignore[union-attr]
        found = re.search(r"(http://([^/]+))/\?token=(\S+)", line)
        assert found, line
        self.url, self.host, self.token = found.group(0), found.group(2), found.group(3)
        self.cookie = f"agent_apps_console_{self.host.rsplit(':', 1)[1]}={self.token}"

    def server_ms(self, path: str) -> float:
        conn = http.client.HTTPConnection(self.host, timeout=60)
        conn.request("GET", path, headers={"Cookie": self.cookie})
        response = conn.getresponse()
        response.read()
        assert response.status == 200, (path, response.status)
        timing = response.getheader("Server-Timing") or ""
        return float(timing.split("dur=")[1])

    def close(self) -> None:
        self.process.send_signal(signal.SIGINT)
        self.process.wait(30)


def live_latencies(console: Console, store_path: Path, root: Path, marks: int) -> list[float]:
    """Milliseconds from the model's text to the page showing it, for ``marks`` texts."""
    from playwright.sync_api import sync_playwright

    cm = ContextManager(cwd=root, home=root / "home", state=str(store_path), env=False, project=False, user=False)
    heard: dict[str, float] = {}

    def hear(topic: str, event: dict[str, Any]) -> None:
        text = str(event.get("text") or "")
        if event.get("type") == "agent-message" and text.startswith("MARK-"):
            heard[text] = float(event["timestamp"]) * 1000

    cm.events.subscribe("bench.live", hear)
    script = [{"delay": 0.4, "text": f"MARK-{n}", "code": "x = 1"} for n in range(marks)] + [{"text": "end"}]
    config = {"agent": "agent-scripted", "script": script, "max_turns": marks + 5, "max_steps": marks + 5}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page()
        page.goto(console.url)
        before = {run.id for run in StateStore(store_path).runs.list(limit=5)}
        call = {"prompt": "P", "name": "live", "config": config, "events": "bench.live"}
        thread = threading.Thread(target=cm.invoke_sync, args=("agent", call))
        thread.start()
        run_id = None
        while run_id is None:
            fresh = [r.id for r in StateStore(store_path).runs.list(limit=5) if r.id not in before]
            run_id = fresh[0] if fresh else None
            time.sleep(0.01)
        page.goto(console.url.split("/?")[0] + f"/runs/{run_id}")
        page.evaluate(
            """(marks) => {
                window.seen = {};
                const look = () => {
                    const text = document.body.textContent;
                    for (let n = 0; n < marks; n++) {
                        const mark = "MARK-" + n;
                        if (!(mark in window.seen) && text.includes(mark)) window.seen[mark] = Date.now();
                    }
                };
                look();
                const watch = {childList: true, subtree: true, characterData: true};
                new MutationObserver(look).observe(document.body, watch);
            }""",
            marks,
        )
        thread.join(120)
        page.wait_for_function("(marks) => Object.keys(window.seen).length >= marks", arg=marks, timeout=30_000)
        seen = page.evaluate("window.seen")
        browser.close()
    # marks already on the page when it opened are not live events
    return [seen[mark] - heard[mark] for mark in sorted(heard) if mark in seen and seen[mark] > heard[mark] - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs of the benchmark (default 3)")
    parser.add_argument("--store-runs", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        store_path = root / "state.db"
        started = time.perf_counter()
        fill(StateStore(store_path), args.store_runs)
        long_id = long_run(root, store_path, args.turns)
        print(f"store: {args.store_runs:,} runs and one of {args.turns} turns, made in "
              f"{time.perf_counter() - started:.1f} s")  # fmt: skip
        console = Console(store_path)
        try:
            console.server_ms("/")  # warm: the first request imports what pages need
            for attempt in range(1, args.runs + 1):
                page = [console.server_ms("/") for _ in range(5)]
                later = [console.server_ms("/?page=150") for _ in range(5)]
                text = [console.server_ms("/?q=skill-3&status=done") for _ in range(3)]
                run = [console.server_ms(f"/runs/{long_id}") for _ in range(3)]
                live = live_latencies(console, store_path, root, marks=12)
                print(
                    f"run {attempt}: runs page median {statistics.median(page):.0f} ms (max {max(page):.0f}), "
                    f"page 150 {statistics.median(later):.0f} ms, filtered by text and status "
                    f"{statistics.median(text):.0f} ms; run of {args.turns} turns median "
                    f"{statistics.median(run):.0f} ms (max {max(run):.0f}); live event to page median "
                    f"{statistics.median(live):.0f} ms, max {max(live):.0f} ms ({len(live)} events)"
                )
        finally:
            console.close()


if __name__ == "__main__":
    main()
