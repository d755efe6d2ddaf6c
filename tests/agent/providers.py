"""How the conformance suite drives each provider.

A harness turns a provider-neutral *model script* (a list of turns: ``text``, ``code``
(a string or a list), ``delay``) into the config that makes that provider's model
play it. Adding a provider to the suite means adding a harness here.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol


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


HARNESSES = {"agent-scripted": scripted}
