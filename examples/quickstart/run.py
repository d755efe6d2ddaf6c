"""The Python API in a few lines: python examples/quickstart/run.py"""

from pathlib import Path

from agent_apps import ArgsInvalid, ContextManager

cm = ContextManager(search_path=[Path(__file__).parent / "skills"])

print(cm.invoke_sync("word-count", {"text": "the cat and the hat"}))  # 5
print(cm.invoke_sync("word-count", {"text": "the cat and the hat", "unique": True}))  # 4
print(cm.invoke_sync("text-stats", {"text": "a rose is a rose"}))  # {'words': 5, 'distinct': 3}
try:
    cm.invoke_sync("word-count", {"text": 42})
except ArgsInvalid as exc:
    print(exc)  # ... at text: 42 is not of type 'string'
print(cm.invoke_sync("haiku", {"task": "a pond"}))
