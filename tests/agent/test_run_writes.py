"""What an agent run writes together: one transaction per turn (its report, its messages,
its journal entries), one for the run's end (final report, status, trace), one for its
opening in a session (its row, its ticket in the session's queue, the session's memory).

Each store method the run calls is noted with the number of the outermost write
transaction it ran in, on SQLite and on a real PostgreSQL server.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agent_apps.testing.plugin import hermetic_manager

from .conftest import COUNTER, no_timers

pytestmark = pytest.mark.anyio

TURNS = [
    {"text": "Counting.", "code": "print(await ctx.manager.invoke('counter', {'tag': 'one'}))"},
    {"text": "Done.", "code": "ctx.manager.finish('Done.')"},
]


def _note_transactions(store: Any, monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, str, Any]]:
    """``(transaction, method, first arg or entry keys)`` for each store method a run
    calls, in order."""
    noted: list[tuple[int, str, Any]] = []
    numbers, local = itertools.count(1), threading.local()
    write = store.db.write

    @contextlib.contextmanager
    def numbered() -> Iterator[Any]:
        if store.db._joined() is None:
            local.number = next(numbers)
        with write() as conn:
            yield conn

    monkeypatch.setattr(store.db, "write", numbered)

    def note(concept: Any, name: str, what: Callable[..., Any], label: str | None = None) -> None:
        method = getattr(concept, name)

        def noting(*args: Any, **kwargs: Any) -> Any:
            with store.db.write():  # the method's own write, numbered before it is noted
                noted.append((local.number, label or name, what(*args, **kwargs)))
                return method(*args, **kwargs)

        monkeypatch.setattr(concept, name, noting)

    note(store.runs, "start_agent", lambda record, **_: None)
    note(store._session_queue, "join", lambda session, run, **_: session)
    note(store.sessions, "begin", lambda session: session, "session begin")
    note(store.sessions, "history", lambda session: session)
    note(store.journal, "begin", lambda run, invocation: None, "checkpoint")
    note(store.journal, "add_rows", lambda run, rows: [row[1] for row in rows])
    note(store.journal, "add", lambda run, agent, key, *_: [key])
    note(store.runs, "report", lambda record, report: report["step_count"])
    note(store.sessions, "append", lambda session, messages, **_: [m["role"] for m in messages])
    note(store.runs, "finish_agent", lambda record, **kwargs: kwargs.get("trace") is not None)
    note(store._session_queue, "remove", lambda ticket: None, "give back")
    return noted


async def test_a_turn_the_runs_end_and_its_opening_each_commit_in_one_transaction(
    skills_path, tmp_path, state_location, write_skill, monkeypatch
):
    write_skill("counter", COUNTER)
    cm = hermetic_manager([skills_path], tmp_path, state=state_location)  # SQLite, then PostgreSQL
    noted = _note_transactions(cm.state, monkeypatch)
    call = {"prompt": "Count.", "user_message": "Go.", "config": {"agent": "agent-scripted", "script": TURNS}}
    assert await cm.invoke("agent", call, session="s1") == "Done."

    def transaction(name: str, match: Callable[[Any], bool] = lambda _: True) -> int:
        (number,) = {n for n, method, what in noted if method == name and match(what)}
        return number

    def keys(*wanted: str) -> Callable[[Any], bool]:
        return lambda what: any(key in what for key in wanted)

    opening = transaction("join")
    assert transaction("start_agent") == transaction("session begin") == opening
    assert transaction("history") == opening  # what the prompt window starts from: read once, there
    checkpoint = transaction("checkpoint")
    assert checkpoint > opening and transaction("add_rows", keys("start")) == checkpoint
    for turn in (1, 2):
        written = transaction("add_rows", keys(f"t.{turn}"))  # the marker, with the turn's queued entries
        assert transaction("report", lambda steps, turn=turn: steps == turn) == written
        first = "user" if turn == 1 else "assistant"
        assert transaction("append", lambda roles, first=first: roles[0] == first) == written
    # the host call of turn 1: journaled no later than its turn's messages
    assert transaction("add_rows", keys("h.1.1")) <= transaction("add_rows", keys("t.1"))
    ended = transaction("finish_agent", lambda traced: traced)  # the trace in the same statement as the end
    assert transaction("give back") == ended  # the session's next run may go on once the end commits
    cm.state.close()


ECHO = """
frontmatter = {"params": {"type": "object"}}
async def main(ctx, args):
    return args
"""

PEEK = """
frontmatter = {"params": {"type": "object"}}
async def main(ctx, args):
    store = ctx.manager.context_manager.state
    return [e.key for e in await store.call(store.journal.entries, ctx.run.run_id)]
"""


async def test_the_model_response_is_journaled_before_the_first_call_acting_on_it(
    skills_path, tmp_path, state_location, write_skill, monkeypatch
):
    """Queued entries are not waited for (no timer here: only the flushes write), yet the
    code's first host call finds the response it acts on, the checkpoint and the start
    in the store; a later call of the same code run needs no write first."""
    no_timers(monkeypatch)
    write_skill("peek", PEEK)
    cm = hermetic_manager([skills_path], tmp_path, state=state_location)
    code = (
        "a = await ctx.manager.invoke('peek', {})\nb = await ctx.manager.invoke('peek', {})\n"
        "ctx.manager.finish([a, b])"
    )
    call = {"prompt": "Peek.", "user_message": "Go.", "config": {"agent": "agent-scripted", "script": [{"code": code}]}}
    first, second = await cm.invoke("agent", call)
    assert first == ["start", "m.1", "c.1"] and second == first  # h.1.1 is queued, written with the turn
    (run,) = cm.state.runs.list()
    keys = [e.key for e in cm.state.journal.entries(run.id)]
    assert keys == ["start", "m.1", "c.1", "h.1.1", "h.1.2", "t.1"]
    cm.state.close()


async def test_parallel_calls_acting_on_one_response_wait_for_one_write(
    skills_path, tmp_path, state_location, write_skill, monkeypatch
):
    """Calls gathered in one code run all wait for the response to be written, and for
    no more: the write that holds it is the only one before them, and none of them
    writes the entries the others queued meanwhile (each did: one batch per call, each
    call waiting for the commits of those that ended before it)."""
    no_timers(monkeypatch)  # only the flushes write
    write_skill("echo", ECHO)
    cm = hermetic_manager([skills_path], tmp_path, state=state_location)
    noted = _note_transactions(cm.state, monkeypatch)
    code = (
        "seen = await asyncio.gather(*[ctx.manager.invoke('echo', {'n': n}) for n in range(4)])\n"
        "ctx.manager.finish(seen)"
    )
    call = {"prompt": "Echo.", "user_message": "Go.", "config": {"agent": "agent-scripted", "script": [{"code": code}]}}
    assert await cm.invoke("agent", call) == [{"n": n} for n in range(4)]
    batches = [keys for _, method, keys in noted if method == "add_rows"]
    assert batches[:2] == [["start"], ["m.1", "c.1"]] and len(batches) == 3, batches
    assert sorted(batches[2]) == ["h.1.1", "h.1.2", "h.1.3", "h.1.4", "t.1"]  # the calls end in any order
    cm.state.close()
