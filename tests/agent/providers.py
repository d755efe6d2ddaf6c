"""How the conformance suite drives each provider.

A harness turns a provider-neutral *model script* (a list of turns: ``text``, ``code``
(a string or a list), ``delay``) into the config that makes that provider's model
play it. Adding a provider to the suite means adding a harness here.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from agent_apps.testing.bedrock import FakeBedrock, dummy_aws_env


class Harness(Protocol):
    name: str

    def config(self, turns: list[dict[str, Any]]) -> dict[str, Any]: ...


class Scripted:
    name = "agent-scripted"

    def config(self, turns: list[dict[str, Any]]) -> dict[str, Any]:
        return {"agent": "agent-scripted", "script": turns}


@contextmanager
def scripted() -> Iterator[Harness]:
    yield Scripted()


#: The model id the fake Bedrock accepts; any other gets the real "invalid model" error.
FAKE_MODEL_ID = "anthropic.claude-fake-v1:0"
#: A delay at least this long means "the model never answers" (the stream hangs until the
#: client goes away), shorter ones pace the stream.
HANG_DELAY = 5.0


def fake_turn(turn: dict[str, Any], index: int = 0) -> dict[str, Any]:
    """A provider-neutral script turn as a FakeBedrock turn."""
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
    """agent-strands with real Strands and boto3, over HTTP, against a local fake Bedrock."""

    name = "agent-strands"

    def __init__(self, fake: FakeBedrock) -> None:
        self.fake = fake
        self.turns = 0

    def config(self, turns: list[dict[str, Any]]) -> dict[str, Any]:
        for turn in turns:
            self.fake.add_turns(fake_turn(turn, self.turns))
            self.turns += 1
        return {
            "agent": "agent-strands",
            "model_id": FAKE_MODEL_ID,
            "endpoint_url": self.fake.endpoint_url,
            "region": "us-east-1",
            "retry_delay": 0,
        }


@contextmanager
def aws_env(region: str = "us-east-1") -> Iterator[None]:
    """Dummy AWS credentials and no config files, restored afterwards."""
    values = {**dummy_aws_env(region), "AWS_PROFILE": None, "AWS_BEARER_TOKEN_BEDROCK": None}
    saved = {name: os.environ.get(name) for name in values}
    try:
        for name, value in values.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextmanager
def strands_bedrock() -> Iterator[Harness]:
    with aws_env(), FakeBedrock(model_ids=[FAKE_MODEL_ID]) as fake:
        yield StrandsBedrock(fake)


#: A real ACP agent CLI written for the tests: it plays the script as its "model".
ACP_AGENT = os.path.join(os.path.dirname(os.path.dirname(__file__)), "extensions", "acp_agent.py")


class AcpAgent:
    """agent-acp driving a real ACP agent CLI (a subprocess over stdio) whose model plays
    the script, and which calls ``invoke`` over our MCP endpoint with a real MCP client."""

    name = "agent-acp"

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.runs = 0

    def config(self, turns: list[dict[str, Any]]) -> dict[str, Any]:
        self.runs += 1
        path = os.path.join(self.directory, f"script-{self.runs}.json")
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(turns, handle)
        return {"agent": "agent-acp", "command": [sys.executable, ACP_AGENT, path], "retry_delay": 0}


@contextmanager
def acp_agent() -> Iterator[Harness]:
    with tempfile.TemporaryDirectory(prefix="agent-apps-acp-") as directory:
        yield AcpAgent(directory)


HARNESSES = {"agent-scripted": scripted}
if importlib.util.find_spec("strands") and importlib.util.find_spec("boto3"):
    HARNESSES["agent-strands"] = strands_bedrock
if importlib.util.find_spec("acp") and importlib.util.find_spec("mcp"):
    HARNESSES["agent-acp"] = acp_agent
