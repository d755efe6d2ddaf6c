"""The provider conformance suite: every agent provider must pass it.

It drives the real ``agent`` skill, the real sandbox and the provider under test, and
checks that the provider follows the hook protocol (``docs/agent.md``, "Writing a
provider"): one turn without tools, tool results fed back, several calls in one turn,
errors as content, cancellation, multi-turn loops, the turn cap, the signal reaching
tools and sandbox code, and the ``stop``, ``deny`` and ``continue`` directives. A
provider that ignores a directive fails it.

A provider package runs it against itself with one line in a test module::

    from agent_apps.testing.conformance import provider_suite
    TestMyProvider = provider_suite(MyHarness)

A *harness* (see :class:`Harness`) makes the provider's model play a provider-neutral
script: a list of turns, each with optional ``text``, ``code`` (a string, or a list for
several calls in one turn), ``reasoning``, ``usage`` (``{input_tokens,
output_tokens}``), ``error`` (``{type, message, retryable}``) and ``delay`` (seconds the
model takes; 5 or more means it never answers until cancelled). :class:`Scripted` does
it for ``agent-scripted``; :func:`strands_bedrock` for ``agent-strands`` against a local
fake Bedrock. The tests are plain functions that run their own event loop, so no async
pytest plugin is needed; they need the ``sandbox`` extra. Importing this module imports
neither strands nor boto3.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import textwrap
import time
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, ClassVar, Protocol

import pytest

from agent_apps.errors import Cancelled, LimitExceeded
from agent_apps.manager import ContextManager
from agent_apps.testing.plugin import hermetic_manager

__all__ = [
    "TOOLS",
    "Harness",
    "ProviderSuite",
    "Scripted",
    "StrandsBedrock",
    "fake_bedrock_turn",
    "provider_suite",
    "strands_bedrock",
]

Turn = dict[str, Any]


class Harness(Protocol):
    """Makes one provider's model play a script.

    ``name`` is the provider skill. ``config(turns)`` returns the ``model`` config that
    selects the provider and makes its model play ``turns`` (called once per agent run).
    A harness may also have ``plugins`` (plugin objects, e.g. the module that declares
    the provider package's skill directory) and ``search_path`` (directories of skill
    files) to put the provider on the suite's search path.
    """

    name: str

    def config(self, turns: list[Turn]) -> dict[str, Any]: ...


#: The skills the suite's agents call: a plain tool, and one that waits until cancelled.
TOOLS: dict[str, str] = {
    "word-count": """
        frontmatter = {
            "description": "Count the words in a text.",
            "params": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
            "metadata": {"returns": {"type": "integer"}},
        }
        async def main(ctx, args):
            return len(args["text"].split())
    """,
    "slow-tool": """
        import asyncio
        frontmatter = {
            "description": "Sleeps until cancelled.",
            "params": {"type": "object", "properties": {"seconds": {"type": "number"}}},
        }
        async def main(ctx, args):
            ctx.signal.add_callback(lambda reason: ctx.manager.emit("tool-cancelled", {"reason": reason}))
            ctx.manager.emit("tool-started", {})
            await asyncio.sleep(args.get("seconds", 60))
            return "slept"
    """,
}

#: Every wait of the suite is bounded by this many seconds (generous: a loaded CI machine).
_BOUND = 60.0
_TOPIC = "conformance"


def _run(test: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """An ``async def`` test as a plain one running its own event loop."""

    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> None:
        asyncio.run(test(*args, **kwargs))

    return run


class ProviderSuite:
    """The tests; :func:`provider_suite` binds them to a harness."""

    harness_factory: ClassVar[Callable[[], Any]]

    @pytest.fixture
    def harness(self) -> Iterator[Harness]:
        made = type(self).harness_factory()
        with made if hasattr(made, "__enter__") else contextlib.nullcontext(made) as harness:
            yield harness

    @pytest.fixture
    def manager(self, harness: Harness, tmp_path: Path) -> ContextManager:
        """A hermetic manager: the suite's tools, the harness's skills, the bundled ones."""
        from agent_apps.sandbox import build

        build()  # the sandbox's first build (tens of seconds) happens here, not in a bounded wait
        skills = tmp_path / "conformance-skills"
        skills.mkdir()
        for name, source in TOOLS.items():
            (skills / f"{name}.skill.py").write_text(textwrap.dedent(source).lstrip("\n"), encoding="utf-8")
        return hermetic_manager(
            [skills, *getattr(harness, "search_path", ())], tmp_path, list(getattr(harness, "plugins", ()))
        )

    @pytest.fixture
    def events(self, manager: ContextManager) -> list[dict[str, Any]]:
        got: list[dict[str, Any]] = []
        manager.events.subscribe(_TOPIC, lambda topic, event: got.append(event))
        return got

    # -- helpers -------------------------------------------------------------------------

    @staticmethod
    async def agent(
        manager: ContextManager,
        harness: Harness,
        turns: list[Turn],
        *,
        config: dict[str, Any] | None = None,
        **args: Any,
    ) -> Any:
        call = {"prompt": "You are a test agent.", "user_message": "Do the test.", "events": _TOPIC, **args}
        call["config"] = {**harness.config(turns), **(config or {})}
        return await asyncio.wait_for(manager.invoke("agent", call), _BOUND)

    @staticmethod
    async def cancelled(
        manager: ContextManager,
        harness: Harness,
        turns: list[Turn],
        *,
        started: Callable[[], bool],
        config: dict[str, Any] | None = None,
    ) -> None:
        """Start a run, cancel its signal once ``started()`` holds, expect ``Cancelled``."""
        from agent_apps.context import Signal

        signal = Signal()
        call = {"prompt": "p", "user_message": "u", "config": {**harness.config(turns), **(config or {})}}
        task = asyncio.ensure_future(manager.invoke("agent", call, signal=signal))
        for _ in range(int(_BOUND / 0.02)):
            if started() or task.done():
                break
            await asyncio.sleep(0.02)
        signal.cancel("stop the test")
        with pytest.raises(Cancelled, match="stop the test"):
            await asyncio.wait_for(task, _BOUND)

    @staticmethod
    def types(events: list[dict[str, Any]], *wanted: str) -> list[str]:
        return [e["type"] for e in events if not wanted or e["type"] in wanted]

    # -- the tests -----------------------------------------------------------------------

    @_run
    async def test_one_turn_without_tools(self, manager, harness, events):
        assert await self.agent(manager, harness, [{"text": "Hello there."}]) == "Hello there."
        assert self.types(events, "turn-start", "turn-end") == ["turn-start", "turn-end"]
        assert events[-1]["type"] == "agent-complete" and events[-1]["turns"] == 1

    @_run
    async def test_tool_result_fed_back_then_answer(self, manager, harness, events):
        code = 'n = await ctx.manager.invoke("word-count", {"text": "a b c"})\nprint("n =", n)'
        turns = [{"text": "Counting.", "code": code}, {"text": "There are 3 words."}]
        assert await self.agent(manager, harness, turns) == "There are 3 words."
        results = [e for e in events if e["type"] == "tool-result"]
        assert len(results) == 1 and "n = 3" in results[0]["result"]
        assert self.types(events, "turn-start") == ["turn-start", "turn-start"]

    @_run
    async def test_several_calls_in_one_turn(self, manager, harness, events):
        turns = [{"code": ["print('first')", "print('second')"]}, {"text": "Both ran."}]
        assert await self.agent(manager, harness, turns) == "Both ran."
        assert [e["result"] for e in events if e["type"] == "tool-result"] == ["first", "second"]

    @_run
    async def test_errors_are_fed_back_as_content(self, manager, harness, events):
        turns = [{"code": "raise ValueError('bad input')"}, {"text": "I saw the error."}]
        assert await self.agent(manager, harness, turns) == "I saw the error."
        (error,) = [e for e in events if e["type"] == "tool-error"]
        assert "ValueError: bad input" in error["result"]

    @_run
    async def test_cancellation_while_the_model_thinks(self, manager, harness):
        await self.cancelled(manager, harness, [{"text": "thinking...", "delay": 60}], started=_after(0.3))

    @_run
    async def test_multi_turn_loop(self, manager, harness, events):
        turns = [
            {"code": "memory['n'] = 1"},
            {"code": "memory['n'] += 1"},
            {"code": "memory['n'] += 1\nprint(memory['n'])"},
            {"text": "Counted to three."},
        ]
        assert await self.agent(manager, harness, turns) == "Counted to three."
        assert [e["result"] for e in events if e["type"] == "tool-result"][-1] == "3"
        assert len(self.types(events, "turn-start")) == 4

    @_run
    async def test_the_turn_cap_holds(self, manager, harness, events):
        # the run stops with the terminal message after the model's last text, not an error
        turns = [{"text": f"Step {i}.", "code": f"print({i})"} for i in range(6)]
        result = await self.agent(manager, harness, turns, config={"max_turns": 2})
        assert result == "Step 1.\n\nStopped: maximum turn limit reached"
        assert self.types(events, "turn-start") == ["turn-start", "turn-start"]
        assert events[-1]["type"] == "agent-complete" and events[-1]["status"] == "max_turns"
        # a run that must finish() a schema cannot end with text: a clear error
        with pytest.raises(LimitExceeded, match=r"Stopped: maximum turn limit reached \(2 turns\) before a valid"):
            await self.agent(manager, harness, turns, config={"max_turns": 2}, returns={"type": "integer"})

    @_run
    async def test_the_signal_reaches_a_running_tool(self, manager, harness):
        heard: list[str] = []
        manager.events.subscribe("tool-*", lambda topic, event: heard.append(topic))
        turns = [{"code": 'await ctx.manager.invoke("slow-tool", {"seconds": 60})'}, {"text": "unreachable"}]
        await self.cancelled(manager, harness, turns, started=lambda: "tool-started" in heard)
        assert "tool-cancelled" in heard

    @_run
    async def test_the_signal_interrupts_running_sandbox_code(self, manager, harness):
        turns = [{"code": "while True:\n    pass"}, {"text": "unreachable"}]
        await self.cancelled(manager, harness, turns, started=_after(0.5), config={"sandbox": {"timeout": 120}})

    @_run
    async def test_directive_stop_is_obeyed(self, manager, harness):
        # the script has exactly one turn: a provider that calls the model again fails
        assert await self.agent(manager, harness, [{"code": "ctx.manager.finish({'ok': True})"}]) == {"ok": True}

    @_run
    async def test_directive_deny_is_obeyed(self, manager, harness, events):
        # one after the other: the second call is announced after the first finished the task
        turns = [{"code": ["ctx.manager.finish(1)", "print('must not run')"]}]
        assert await self.agent(manager, harness, turns, config={"parallel_tool_calls": False}) == 1
        texts = [e["result"] for e in events if e["type"] in ("tool-result", "tool-error")]
        assert not any("must not run" in t for t in texts)
        assert any("denied" in t for t in texts)

    @_run
    async def test_directive_continue_with_a_message_is_obeyed(self, manager, harness):
        returns = {"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]}
        turns = [{"text": "The answer is 3."}, {"code": "ctx.manager.finish({'count': 3})"}]
        assert await self.agent(manager, harness, turns, returns=returns) == {"count": 3}


def _after(seconds: float) -> Callable[[], bool]:
    """True once ``seconds`` have passed (the run had time to get going)."""
    end = time.monotonic() + seconds
    return lambda: time.monotonic() >= end


def provider_suite(harness: Callable[[], Any], *, name: str | None = None) -> type[ProviderSuite]:
    """The suite as a test class bound to ``harness``: assign it to a ``Test...`` name.

    ``harness`` is called once per test and returns a :class:`Harness`, or a context
    manager that yields one (to start and stop a fake model server around the test).
    """
    cls_name = name or f"Test{getattr(harness, '__name__', 'Provider').title().replace('_', '')}Conformance"
    return type(cls_name, (ProviderSuite,), {"harness_factory": staticmethod(harness), "__test__": True})


# -- harnesses of the bundled providers ------------------------------------------------


class Scripted:
    """``agent-scripted``: the script is its config, as it is."""

    name = "agent-scripted"

    def config(self, turns: list[Turn]) -> dict[str, Any]:
        return {"agent": "agent-scripted", "script": turns}


#: The model id the fake Bedrock accepts; any other gets the real "invalid model" error.
FAKE_MODEL_ID = "anthropic.claude-fake-v1:0"
#: A delay at least this long means "the model never answers" (the stream hangs until the
#: client goes away); shorter ones pace the stream.
HANG_DELAY = 5.0


def fake_bedrock_turn(turn: Turn, index: int = 0) -> dict[str, Any]:
    """A provider-neutral script turn as a :class:`~agent_apps.testing.FakeBedrock` turn."""
    if "error" in turn:
        error = turn["error"] if isinstance(turn["error"], dict) else {"message": str(turn["error"])}
        out: dict[str, Any] = {"error": error.get("type") or "ModelErrorException"}
        if error.get("message"):
            out["message"] = error["message"]
        return out
    out = {}
    if turn.get("text"):
        out["text"] = turn["text"]
    if turn.get("reasoning"):
        out["reasoning"] = turn["reasoning"]
    codes = turn.get("code")
    codes = [codes] if isinstance(codes, str) else list(codes or [])
    if codes:
        out["tool_uses"] = [
            {"name": "invoke", "input": {"code": code}, "id": f"tooluse_{index}_{i}"} for i, code in enumerate(codes)
        ]
    if not out:
        out["text"] = ""
    usage = turn.get("usage")
    if usage:
        out["usage"] = {"inputTokens": usage.get("input_tokens", 0), "outputTokens": usage.get("output_tokens", 0)}
    delay = float(turn.get("delay") or 0)
    if delay >= HANG_DELAY:
        out["hang_after"] = 0
    elif delay > 0:
        out["delay"] = delay / 4
    return out


class StrandsBedrock:
    """``agent-strands`` with real Strands and boto3, over HTTP, against a local fake Bedrock."""

    name = "agent-strands"

    def __init__(self, fake: Any) -> None:
        self.fake = fake
        self.turns = 0

    def config(self, turns: list[Turn]) -> dict[str, Any]:
        for turn in turns:
            self.fake.add_turns(fake_bedrock_turn(turn, self.turns))
            self.turns += 1
        return {
            "agent": "agent-strands",
            "model_id": FAKE_MODEL_ID,
            "endpoint_url": self.fake.endpoint_url,
            "region": "us-east-1",
            "retry_delay": 0,
        }


@contextlib.contextmanager
def strands_bedrock() -> Iterator[StrandsBedrock]:
    """A :class:`StrandsBedrock` harness with dummy AWS credentials and no AWS config files,
    restored afterwards (needs the ``strands`` extra)."""
    from agent_apps.testing.bedrock import FakeBedrock, dummy_aws_env

    values: dict[str, str | None] = {**dummy_aws_env(), "AWS_PROFILE": None, "AWS_BEARER_TOKEN_BEDROCK": None}
    saved = {name: os.environ.get(name) for name in values}
    try:
        _set_env(values)
        with FakeBedrock(model_ids=[FAKE_MODEL_ID]) as fake:
            yield StrandsBedrock(fake)
    finally:
        _set_env(saved)


def _set_env(values: dict[str, str | None]) -> None:
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
