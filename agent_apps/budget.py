"""Budgets: what one run tree may spend and start (docs/supervision.md).

Three config keys under ``model``, read from an agent's cascade:

* ``budget: {tokens, input_tokens, output_tokens, cost_usd, turns, deadline_s}``, the
  **execution budget**. Each agent run has a :class:`Ledger` with the limits its own
  config sets; usage is charged to it and to every ledger above it, so an agent started
  from agent code draws on what its parents have left and its usage counts toward
  theirs. Cost comes from the price table (``prices``, by model id; bundled defaults
  below, extended or replaced in any config file).
* ``spawn: {max_agents, max_depth, max_memory_mb}``, the **spawn budget**: how many
  agents one run may start (the outermost included), how deep they may nest, and the
  MB of sandbox memory its live agents may hold at once. A sub-agent's limits (these,
  its sandbox limits, its turns and steps) are at most its caller's.
* ``priority: background | low | normal | high | critical``: who goes first when runs
  wait for a sandbox or a model call (:mod:`agent_apps.admission`); unset, an agent
  has its caller's priority (``normal`` at the top).

A bad value is a :class:`~agent_apps.errors.ConfigError` that names the key and the
file (and line) that set it.

Token counts come from peers (a model endpoint, an ACP agent) and are not trusted:
:func:`clamp_usage` makes each one a whole number from 0 to :data:`MAX_TOKENS` before it
is charged, priced or reported, so a negative count cannot give back budget and a huge
or non-numeric one cannot break the arithmetic.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

from .config import DEFAULTS
from .config_lines import line_in_file
from .errors import BudgetExceeded, ConfigError

if TYPE_CHECKING:
    from .config import Resolved

__all__ = [
    "BUDGET_KEYS",
    "MAX_TOKENS",
    "PRIORITIES",
    "SPAWN_KEYS",
    "Ledger",
    "Limits",
    "Price",
    "SpawnLimits",
    "Supervision",
    "clamp_usage",
    "supervision_config",
    "with_clamped_usage",
]

#: Priorities, lowest first.
PRIORITIES = ("background", "low", "normal", "high", "critical")

#: ``model.budget`` keys: whole numbers, except the two in dollars and seconds.
BUDGET_KEYS = ("tokens", "input_tokens", "output_tokens", "cost_usd", "turns", "deadline_s")
_REAL_KEYS = frozenset({"cost_usd", "deadline_s"})
SPAWN_KEYS = ("max_agents", "max_depth", "max_memory_mb")
#: The most tokens one model call may report of each kind (no model comes near): a
#: larger count is taken as this, so that sums stay exact and fit a 64-bit column.
MAX_TOKENS = 10**9
_USAGE_OF_PRICE = {
    "input": "input_tokens",
    "output": "output_tokens",
    "cache_read": "cache_read_tokens",
    "cache_write": "cache_write_tokens",
}


@dataclass(frozen=True, slots=True)
class Limits:
    """An execution budget; ``None`` is no limit."""

    tokens: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    turns: int | None = None
    deadline_s: float | None = None

    def __bool__(self) -> bool:
        return any(getattr(self, key) is not None for key in BUDGET_KEYS)


@dataclass(frozen=True, slots=True)
class SpawnLimits:
    max_agents: int
    max_depth: int
    #: The MB of sandbox memory (``sandbox.memory_mb``) the tree's live agents may hold at once.
    max_memory_mb: int = 2048

    def tighter(self, other: SpawnLimits | None) -> SpawnLimits:
        """The smaller of each limit (a sub-agent gets at most its caller's)."""
        if other is None:
            return self
        return SpawnLimits(*(min(getattr(self, key), getattr(other, key)) for key in SPAWN_KEYS))


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million tokens of each kind."""

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0

    def cost(self, usage: Mapping[str, Any]) -> float:
        usage = clamp_usage(usage)
        return sum(float(getattr(self, kind)) * usage.get(key, 0) for kind, key in _USAGE_OF_PRICE.items()) / 1_000_000


@dataclass(frozen=True)
class Supervision:
    """What one agent's config says about budgets, spawning and priority."""

    budget: Limits
    spawn: SpawnLimits
    #: ``None``: the caller's.
    priority: str | None
    #: The price of the agent's model, when the table has it.
    price: Price | None
    #: Where each ``model.budget`` key was set (for error messages).
    sources: Mapping[str, str]


def supervision_config(resolved: Resolved, *, model_id: str | None) -> Supervision:
    """Read and check ``model.budget``, ``model.spawn``, ``model.priority`` and the price
    of ``model_id`` from an agent's resolved config."""
    model = resolved.values.get("model") or {}
    limits: dict[str, Any] = {}
    budget = model.get("budget")
    if budget is not None:
        _mapping(resolved, "model.budget", budget)
        for key, value in budget.items():
            if value is not None:
                limits[key] = _number(resolved, f"model.budget.{key}", value, real=key in _REAL_KEYS)
    spawn_values: dict[str, int] = {}
    spawn = model.get("spawn") or {}
    _mapping(resolved, "model.spawn", spawn)
    for key, value in spawn.items():
        positive = key != "max_depth"
        spawn_values[key] = int(_number(resolved, f"model.spawn.{key}", value, real=False, positive=positive))
    priority = model.get("priority")
    if priority is not None and priority not in PRIORITIES:
        hint = difflib.get_close_matches(str(priority), PRIORITIES, n=1)
        raise _error(
            resolved,
            "model.priority",
            f"model.priority must be one of {', '.join(PRIORITIES)}, not {priority!r}"
            + (f" (did you mean {hint[0]!r}?)" if hint else ""),
        )
    price = _price(resolved, model_id) if model_id else None
    if limits.get("cost_usd") is not None and price is None:
        raise _error(
            resolved,
            "model.budget.cost_usd",
            f"model.budget.cost_usd needs the price of the model, and the price table has no entry for "
            f"model_id {model_id!r}: add one under 'prices' ({{MODEL_ID: {{input: USD, output: USD}}}}, "
            "per million tokens)"
            if model_id
            else "model.budget.cost_usd needs model.model_id, to look up the model's price",
        )
    sources = {key: resolved.sources.get(f"model.budget.{key}", "config") for key in limits}
    return Supervision(
        Limits(**limits),
        SpawnLimits(**{**DEFAULTS["model"]["spawn"], **spawn_values}),
        priority,
        price,
        sources,
    )


class Ledger:
    """One agent run's account in the execution budget of its tree.

    ``charge`` adds usage here and to every ledger above (usage rolls up); ``check``
    raises :class:`BudgetExceeded` when this ledger or one above is past a limit, so
    a nested agent is stopped by its parents' limits as well as its own.
    """

    __slots__ = ("limits", "name", "parent", "sources", "started", "used")

    def __init__(
        self, limits: Limits, parent: Ledger | None, *, name: str, started: float, sources: Mapping[str, str]
    ) -> None:
        self.limits = limits
        self.parent = parent
        self.name = name
        self.started = started
        self.sources = sources
        self.used: dict[str, float] = {"input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0, "turns": 0}

    def chain(self) -> list[Ledger]:
        """This ledger and every one above it, innermost first."""
        chain: list[Ledger] = []
        node: Ledger | None = self
        while node is not None:
            chain.append(node)
            node = node.parent
        return chain

    def charge(self, usage: Mapping[str, Any], cost: float = 0.0) -> None:
        """Count a model call's ``usage`` (and its cost) here and above."""
        usage = clamp_usage(usage)
        tokens_in = usage.get("input_tokens", 0)
        tokens_out = usage.get("output_tokens", 0)
        cost = cost if math.isfinite(cost) and cost > 0 else 0.0
        for node in self.chain():
            node.used["input_tokens"] += tokens_in
            node.used["output_tokens"] += tokens_out
            node.used["cost_usd"] += cost

    def start_turn(self) -> None:
        """A turn is about to start: refused (BudgetExceeded) when any ledger up the
        chain has no turn, token or dollar left; else counted."""
        for node in self.chain():
            node._check(self.name, starting=True)
        for node in self.chain():
            node.used["turns"] += 1

    def check(self) -> None:
        """Raise BudgetExceeded when this ledger or one above is past a limit."""
        for node in self.chain():
            node._check(self.name, starting=False)

    def _check(self, agent: str, *, starting: bool) -> None:
        limits, used = self.limits, self.used
        if not limits:
            return
        amounts = {
            "tokens": used["input_tokens"] + used["output_tokens"],
            "input_tokens": used["input_tokens"],
            "output_tokens": used["output_tokens"],
            "cost_usd": used["cost_usd"],
        }
        for key, amount in amounts.items():
            limit = getattr(limits, key)
            if limit is not None and (amount >= limit if starting else amount > limit):
                raise self._exceeded(agent, key, limit, amount)
        if starting and limits.turns is not None and used["turns"] >= limits.turns:
            note = f"; turn {int(used['turns']) + 1} refused"
            raise self._exceeded(agent, "turns", limits.turns, used["turns"], note=note)

    def deadline(self) -> float | None:
        """When the earliest ``deadline_s`` up the chain runs out (``time.time()``)."""
        ends = [node.started + node.limits.deadline_s for node in self.chain() if node.limits.deadline_s is not None]
        return min(ends) if ends else None

    def deadline_exceeded(self, now: float) -> BudgetExceeded | None:
        """The error of a run stopped at a ``deadline_s`` (of the ledger that set it),
        or None when no deadline has passed."""
        for node in self.chain():
            limit = node.limits.deadline_s
            if limit is not None and now >= node.started + limit:
                return node._exceeded(self.name, "deadline_s", limit, round(now - node.started, 3))
        return None

    def _exceeded(self, agent: str, key: str, limit: float, amount: float, note: str = "") -> BudgetExceeded:
        """The error for ``agent``, stopped by this ledger's ``key`` (its own or an
        ancestor's, which the message then names)."""
        if agent != self.name:
            note += f"; the budget of agent {self.name!r}"
        return BudgetExceeded(f"model.budget.{key}", limit, amount, who=agent, source=self.sources.get(key), note=note)

    def to_json(self) -> dict[str, Any]:
        """The limits and the usage so far, for the run report."""
        limits = {key: getattr(self.limits, key) for key in BUDGET_KEYS if getattr(self.limits, key) is not None}
        used = dict(self.used)
        used["cost_usd"] = round(used["cost_usd"], 6)
        used["tokens"] = used["input_tokens"] + used["output_tokens"]
        return {"limits": limits, "used": used}


# -- usage from peers ------------------------------------------------------------------


def clamp_usage(usage: Any) -> dict[str, Any]:
    """A peer's token counts, each a whole number from 0 to :data:`MAX_TOKENS`.

    ``usage`` is a mapping of count names (``input_tokens``...) to what the peer said.
    A negative count, NaN, a missing or non-numeric value (a string that is not a
    number, a list) counts as 0; a fraction is rounded down; a count above MAX_TOKENS
    (infinity included) counts as MAX_TOKENS. ``estimated`` (whether the provider
    could only guess) stays a boolean. Anything that is not a mapping is no usage: ``{}``.
    """
    if not isinstance(usage, Mapping):
        return {}
    clamped: dict[str, Any] = {}
    for key, value in usage.items():
        key = str(key)[:64]
        clamped[key] = value is True if key == "estimated" else _token_count(value)
    return clamped


def with_clamped_usage(event: Mapping[str, Any]) -> dict[str, Any]:
    """A provider's hook event with its usage clamped (:func:`clamp_usage`): a
    ``turn-end``'s ``usage`` and a ``model-response``'s ``response.usage``, where
    token counts enter an agent run."""
    event = dict(event)
    if "usage" in event and event["usage"] is not None:
        event["usage"] = clamp_usage(event["usage"])
    response = event.get("response")
    if isinstance(response, Mapping) and response.get("usage") is not None:
        event["response"] = {**response, "usage": clamp_usage(response["usage"])}
    return event


def _token_count(value: Any) -> int:
    if isinstance(value, bool) or value is None:
        return 0
    if isinstance(value, int):
        return min(max(value, 0), MAX_TOKENS)
    if isinstance(value, str):
        try:
            value = float(value.strip()[:64])
        except ValueError:
            return 0
    if not isinstance(value, float) or math.isnan(value):
        return 0
    return int(min(max(value, 0.0), MAX_TOKENS))


# -- checking config values ----------------------------------------------------------


def _number(resolved: Resolved, key: str, value: Any, *, real: bool, positive: bool = True) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if ok and not real:
        ok = float(value).is_integer()
    if not ok or value < 0 or (positive and value == 0):
        kind = "a number" if real else "a whole number"
        bound = "> 0" if positive else ">= 0"
        raise _error(resolved, key, f"{key} must be {kind} {bound}, not {value!r}")
    return float(value) if real else int(value)


def _mapping(resolved: Resolved, key: str, value: Any) -> None:
    if not isinstance(value, Mapping):
        raise _error(resolved, key, f"{key} must be a mapping, not {type(value).__name__}")


def _price(resolved: Resolved, model_id: str) -> Price | None:
    """The price of ``model_id``: an exact entry, else the longest matching glob."""
    table = resolved.values.get("prices") or {}
    _mapping(resolved, "prices", table)
    table = {pattern: entry for pattern, entry in table.items() if entry is not None}  # null: an entry removed
    entry = table.get(model_id)
    pattern = model_id
    if entry is None:
        globs = sorted((p for p in table if isinstance(p, str) and fnmatchcase(model_id, p)), key=len, reverse=True)
        if not globs:
            return None
        pattern = globs[0]
        entry = table[pattern]
    key = f"prices.{pattern}"
    _mapping(resolved, key, entry)
    values = {}
    for kind, value in entry.items():
        values[kind] = _number(resolved, f"{key}.{kind}", value, real=True, positive=False)
    return Price(**values)


def _error(resolved: Resolved, key: str, message: str) -> ConfigError:
    """A ConfigError naming the layer (file and line) that set ``key``."""
    source = resolved.sources.get(key)
    parts = key.split(".")
    while source is None and len(parts) > 1:  # a mapping's own entry: its first key's layer
        parts.pop()
        prefix = ".".join(parts) + "."
        source = next((s for k, s in resolved.sources.items() if k.startswith(prefix)), None)
    line = line_in_file(source, tuple(key.split("."))) if source is not None else None
    return ConfigError(message, path=source or "config", line=line)
