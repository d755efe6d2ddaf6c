"""What the information agent reads: the runs run-stats heard, ended ones first by start."""

import json
from pathlib import Path

frontmatter = {
    "description": "The runs heard by run-stats: their status, turns, model calls, code runs and tokens.",
    "params": {"type": "object", "properties": {}, "additionalProperties": False},
    "metadata": {
        "returns": {"type": "object", "required": ["ended", "running"]},
        "tags": ["monitoring"],
    },
}


async def main(ctx, args):
    path = Path(ctx.manager.context_manager.cwd) / "run-stats.json"
    runs = list(json.loads(path.read_text()).values()) if path.exists() else []
    ended = sorted((r for r in runs if r["status"] != "running"), key=lambda r: r["started_at"] or 0)
    return {"ended": ended, "running": sum(r["status"] == "running" for r in runs)}
