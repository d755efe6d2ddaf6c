"""The prompt window: compaction strategies, the summarize trigger and its fallback,
stale tool results, and plugging in strategies through entry points."""

from __future__ import annotations

import asyncio
import sys
import textwrap

import pytest

from agent_apps.errors import ConfigError
from agent_apps.state import StateStore
from agent_apps.state.messages import Entry, describe_content
from agent_apps.state.window import (
    Budget,
    PromptWindow,
    StoreHistory,
    Summary,
    compaction_options,
    compaction_strategy,
    mark_stale,
)

PYTHON_SOURCE = "import os\n\n\ndef main():\n    return os.getcwd()\n" * 40


@pytest.fixture
def store(state_location):
    return StateStore(state_location)


def fill(store, turns, *, size=400):
    for n in range(turns):
        store.sessions.append(
            "s",
            [
                {"role": "user", "text": f"q{n} " + "u" * size},
                {"role": "assistant", "text": f"a{n}", "tool_calls": [{"id": f"c{n}", "name": "invoke", "input": {}}]},
                {"role": "tool", "tool_call_id": f"c{n}", "name": "invoke", "text": f"r{n} " + "t" * size},
                {"role": "assistant", "text": f"done {n}"},
            ],
        )  # fmt: skip


def window(store, strategy="summarize", *, context_window=10_000, summarizer=None, **options):
    opts = compaction_options({"strategy": strategy, "stale_turns": 0, **options})
    budget = Budget(context_window, system=500, reserve=500, threshold=opts["threshold"], keep=opts["keep"])
    return PromptWindow(
        StoreHistory(store), compaction_strategy(opts), budget, summarizer=summarizer, stale_turns=opts["stale_turns"]
    )


def test_below_the_threshold_the_window_is_the_whole_history(store):
    fill(store, 3)  # ~630 tokens, budget 9,000: far below 70%
    calls = []

    async def summarizer(messages, previous):
        calls.append(messages)
        return Summary("never")

    w = window(store, summarizer=summarizer)
    messages = asyncio.run(w.get_prompt_window("s"))
    assert len(messages) == 12 and not calls and w.last.through is None


def test_summarize_compacts_past_70_percent_keeps_the_newest_30_percent_and_stores_it(store):
    fill(store, 40)  # ~8,400 tokens of history; budget 9,000: trigger 6,300, keep 2,700
    seen = []

    async def summarizer(messages, previous):
        seen.append((messages, previous))
        return Summary("They asked 40 questions.", ["The user likes short answers."])

    facts = []
    w = window(store, summarizer=summarizer)
    w.on_facts = facts.extend
    messages = asyncio.run(w.get_prompt_window("s"))
    ((old, previous),) = seen
    assert previous is None and old[0]["text"].startswith("q0 ")
    assert messages[0] == {"role": "summary", "text": "They asked 40 questions."}
    kept = messages[1:]
    assert sum(len(m.get("text", "")) for m in kept) / 4 <= 2_700 + 150  # about 30% of the budget
    assert kept[0]["role"] == "user" and kept[-1]["text"] == "done 39"  # a clean start; the newest kept
    assert len(old) + len(kept) == 160
    assert facts == ["The user likes short answers."]
    # stored: the next window starts from the summary, without another model call
    info = store.sessions.get("s")
    assert info.summary == "They asked 40 questions." and info.summary_through == len(old)
    again = asyncio.run(window(store, summarizer=summarizer).get_prompt_window("s"))
    assert again == messages and len(seen) == 1
    assert len(store.sessions.messages("s")) == 160  # the stored messages stay whole


def test_a_failing_summarizer_drops_the_old_part_and_keeps_the_recent_one(store):
    fill(store, 40)

    async def summarizer(messages, previous):
        raise RuntimeError("ThrottlingException: slow down")

    w = window(store, summarizer=summarizer)
    messages = asyncio.run(w.get_prompt_window("s"))
    assert messages[0]["role"] == "user" and messages[-1]["text"] == "done 39"
    assert "RuntimeError" in w.last.failed and w.last.summary is None
    info = store.sessions.get("s")
    assert info.summary is None and info.summary_through == w.last.removed  # dropped for good


def test_truncate_and_sliding_window_leave_the_store_alone(store):
    fill(store, 40)
    truncated = asyncio.run(window(store, "truncate").get_prompt_window("s"))
    assert truncated[0]["role"] == "user" and truncated[-1]["text"] == "done 39"
    assert sum(len(m.get("text", "")) for m in truncated) / 4 <= 6_300 + 150
    sliding = asyncio.run(window(store, "sliding-window", window_messages=6).get_prompt_window("s"))
    assert len(sliding) <= 6 and sliding[0]["role"] != "tool" and sliding[-1]["text"] == "done 39"
    assert store.sessions.get("s").summary_through == 0


def test_stale_tool_results_are_one_line_summaries_in_the_window_only(store):
    store.sessions.append(
        "s",
        [
            {"role": "user", "text": "read it"},
            {"role": "assistant", "text": "", "tool_calls": [{"id": "c", "name": "invoke", "input": {"code": "r()"}}]},
            {"role": "tool", "tool_call_id": "c", "name": "invoke", "text": PYTHON_SOURCE},
            *[{"role": "assistant", "text": f"turn {n}"} for n in range(4)],
        ],
    )
    messages = asyncio.run(window(store, stale_turns=4).get_prompt_window("s"))
    size = len(PYTHON_SOURCE.encode())
    lines = PYTHON_SOURCE.count("\n") + 1
    assert messages[2]["text"] == f"[Summary: Returned {size} bytes ({lines} lines) of Python source]"
    assert store.sessions.messages("s")[2].message["text"] == PYTHON_SOURCE
    fresh = asyncio.run(window(store, stale_turns=5).get_prompt_window("s"))
    assert fresh[2]["text"] == PYTHON_SOURCE  # not yet stale


def test_content_kinds_are_guessed():
    assert describe_content('{"a": [1, 2, 3]}').endswith("of JSON")
    assert describe_content("# Title\n\nSome words.\n").endswith("of Markdown")
    assert describe_content("package main\nfunc main() {}\n").endswith("of Go source")
    assert describe_content("just words").endswith("of text")
    entries = [
        Entry(1, {"role": "tool", "tool_call_id": "c", "text": "x" * 500}, 0),
        Entry(2, {"role": "assistant"}, 0),
    ]
    mark_stale(entries, 0)
    assert entries[0].message["text"] == "x" * 500  # 0: never stale
    mark_stale(entries, 1)
    assert entries[0].message["text"] == "[Summary: Returned 500 bytes (1 lines) of text]"


def test_bad_compaction_options_are_clear_errors():
    with pytest.raises(ConfigError, match="model.compaction.threshold"):
        compaction_options({"threshold": 7})
    with pytest.raises(ConfigError, match="model.compaction.stale_turns"):
        compaction_options({"stale_turns": -1})
    with pytest.raises(ConfigError, match=r"unknown 'nope' \(built in: summarize, truncate, sliding-window"):
        compaction_strategy({"strategy": "nope"})


def test_a_strategy_from_an_installed_package(tmp_path, monkeypatch, store):
    (tmp_path / "lastone.py").write_text(
        textwrap.dedent(
            """
            from agent_apps.state.window import Compacted

            class LastOne:
                def __init__(self, options):
                    self.options = options

                async def compact(self, history, budget, summarizer):
                    return Compacted(history.messages()[-1:], removed=len(history.entries) - 1)
            """
        )
    )
    dist = tmp_path / "lastone-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: lastone\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[agent_apps.compaction]\nlast-one = lastone:LastOne\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "lastone", raising=False)
    fill(store, 2)
    messages = asyncio.run(window(store, "last-one").get_prompt_window("s"))
    assert messages == [{"role": "assistant", "text": "done 1"}]


def test_a_python_file_with_a_comment_header_is_python():
    assert describe_content("# a script\nimport os\nprint(os.getcwd())\n").endswith("of Python source")
    assert describe_content("Traceback (most recent call last):\n  File 'x.py'\nimport error\n").endswith("traceback")
