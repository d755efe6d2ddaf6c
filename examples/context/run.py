"""The worked example of docs/context.md: python examples/context/run.py

1. What the model reads for "Can we plan my October trip to Porto?": the system prompt,
   its stable prefix and the memory retrieved for the message.
2. The same skill run by its scripted model: it loads its guidance, reads a file of the
   guidance's folder, searches its memory and answers.
"""

from pathlib import Path

from agent_apps import ContextManager

HERE = Path(__file__).parent
cm = ContextManager(search_path=[HERE / "skills"], state=":memory:")
task = {"task": "Can we plan my October trip to Porto?"}

print(cm.invoke_sync("assistant", task, config={"model": {"agent": "show-prompt"}}))
print("=" * 72)
print(cm.invoke_sync("assistant", task))
