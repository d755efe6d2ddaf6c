"""The console: a local web page over the state store (``agent-apps console``).

It shows the runs (filtered, those waiting for approval first), each run turn by turn
with its tree of agents and a timeline, live while it runs; the calls waiting for
approval, with buttons that decide and resume them; sessions as conversations; and
schedules. See ``docs/console.md``.

Nothing here is imported by ``import agent_apps`` or the other commands: Starlette and
uvicorn load only for ``agent-apps console`` (the ``console`` extra).
"""
