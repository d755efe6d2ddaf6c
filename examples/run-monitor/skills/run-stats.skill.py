"""The information agent's ears: hears every event of every run and keeps, per run id,
what happened in it (seed 001's InformationAgent aggregates metrics from events).

Subscribe it to the progress topics of all runs, ``run.*`` (each run publishes its
events on ``run.RUN_ID``)::

    agent-apps invoke event-subscribe topic='run.*' ref=run-stats persist:=true

It keeps its figures in ``run-stats.json`` in the working folder, so the runs of every
process that opens the same state store (which holds the persisted subscription) add
to it.
"""

import json
from pathlib import Path

frontmatter = {
    "description": "Aggregate agent events by run id into run-stats.json (subscribe it to 'run.*').",
    "params": {
        "type": "object",
        "properties": {"topic": {"type": "string"}, "event": {"type": "object"}},
        "required": ["topic", "event"],
    },
    "metadata": {"tags": ["monitoring"]},
}

STATS = "run-stats.json"


def new_run(run_id):
    return {
        "run_id": run_id, "name": None, "status": "running", "agents": 0, "turns": 0, "model_calls": 0,
        "code_runs": 0, "code_errors": 0, "approvals": 0, "input_tokens": 0, "output_tokens": 0,
        "started_at": None, "ended_at": None,
    }  # fmt: skip


async def main(ctx, args):
    event = args["event"]
    run_id = event.get("run_id") or args["topic"].removeprefix("run.")
    path = Path(ctx.manager.context_manager.cwd) / STATS
    stats = json.loads(path.read_text()) if path.exists() else {}
    run = stats.setdefault(run_id, new_run(run_id))
    kind, outermost = event["type"], event.get("depth") == 0
    if kind == "agent-start":
        run["agents"] += 1
        if outermost:
            run["name"], run["started_at"] = event.get("agent"), event.get("timestamp")
    elif kind == "turn-start":
        run["turns"] += 1
    elif kind == "model-response":
        run["model_calls"] += 1
    elif kind == "tool-call":
        run["code_runs"] += 1
    elif kind == "tool-error":
        run["code_errors"] += 1
    elif kind == "approval-requested":
        run["approvals"] += 1
    elif kind in ("agent-complete", "agent-error") and event.get("status") and outermost:
        usage = event.get("usage") or {}
        run["input_tokens"] += int(usage.get("input_tokens") or 0)
        run["output_tokens"] += int(usage.get("output_tokens") or 0)
        run["status"], run["ended_at"] = event["status"], event.get("timestamp")
    path.write_text(json.dumps(stats, indent=1))
