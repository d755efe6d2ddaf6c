"""The information agent (seed 001's InformationAgent): python examples/run-monitor/run.py

1. run-stats is subscribed to every run's progress topic, run.RUN_ID (``event-subscribe
   {topic: "run.*", ref: "run-stats"}``) and aggregates each run's events by its id;
2. two worker agents run (proofread, twice);
3. the information agent (runs-digest) reads the figures and reports, one line a run.
"""

import json
import tempfile
from pathlib import Path

from agent_apps import ContextManager

HERE = Path(__file__).parent
work = Path(tempfile.mkdtemp())  # where run-stats.json is kept
cm = ContextManager(search_path=[HERE / "skills"], cwd=work, state=":memory:")
# event-subscribe is an admin skill: this script allows it (a project would, in agent-apps.yaml)
allow = {"security": {"policy": {"allow": ["event-subscribe"]}}}

print(cm.invoke_sync("event-subscribe", {"topic": "run.*", "ref": "run-stats"}, config=allow)["topic"])
print(cm.invoke_sync("proofread", {"task": "the cat sat on the mat"}))
print(cm.invoke_sync("proofread", {"task": "a short one"}))
print(cm.invoke_sync("runs-digest"))
stats = json.loads((work / "run-stats.json").read_text())
print(sorted({(run["name"], run["status"]) for run in stats.values()}))
