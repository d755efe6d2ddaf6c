"""The prompt window: what a model is shown of a session's history.

:meth:`PromptWindow.get_prompt_window` is the one call behind it. It asks a
:class:`HistoryProvider` for the history (the state store by default) and a
:class:`CompactionStrategy` to fit it into the model's context, then shows stale tool
results as one-line summaries. Both are pluggable by name (``model.history``,
``model.compaction.strategy``): the built-in names below, or an entry point of an
installed package in the group ``agent_apps.history`` / ``agent_apps.compaction`` whose
object is called with the options and returns the provider or the strategy.

Built-in strategies:

``summarize`` (default)
    When the history passes ``threshold`` (70%) of the budget (context window minus
    system prompt minus ``reserve``), keep the newest messages that fit in ``keep``
    (30%) of it, and have the model summarize the older part, with facts worth keeping
    flushed to the workspace's ``MEMORY.md``. The summary replaces the older part for
    good (it is stored with the session; the messages themselves stay stored). When the
    summarizing call fails, the older part is dropped and the recent one kept.
``truncate``
    Show the newest messages that fit in ``threshold`` of the budget; nothing is stored.
``sliding-window``
    Show the newest ``window_messages`` messages (default 40); nothing is stored.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import ConfigError
from .messages import Entry, History, Message, decode, estimate_text, summary_message

if TYPE_CHECKING:
    from . import StateStore

__all__ = [
    "Budget",
    "CompactionStrategy",
    "Compacted",
    "HistoryProvider",
    "PromptWindow",
    "SlidingWindow",
    "StoreHistory",
    "Summarize",
    "Summary",
    "Truncate",
    "compaction_options",
    "compaction_strategy",
    "history_provider",
    "mark_stale",
]

DEFAULTS: dict[str, Any] = {
    "strategy": "summarize",
    "threshold": 0.7,
    "keep": 0.3,
    "reserve": 4096,
    "stale_turns": 4,
    "window_messages": 40,
    "during_run": True,
}


@dataclass(frozen=True)
class Summary:
    """What the summarizing model call returned."""

    text: str
    facts: list[str] = field(default_factory=list)


#: ``summarizer(messages, previous_summary) -> Summary``; raises when the call fails.
Summarizer = Callable[[list[Message], "str | None"], Awaitable[Summary]]


@dataclass(frozen=True)
class Budget:
    """How many tokens of history fit: ``context_window - system - reserve``."""

    context_window: int
    system: int
    reserve: int = 4096
    threshold: float = 0.7
    keep: float = 0.3

    @property
    def available(self) -> int:
        return max(0, self.context_window - self.system - self.reserve)

    @property
    def trigger(self) -> int:
        """Compact when the history reaches this many tokens."""
        return int(self.available * self.threshold)

    @property
    def kept(self) -> int:
        """Tokens of recent history a compaction keeps."""
        return int(self.available * self.keep)


@dataclass
class Compacted:
    """A strategy's answer: the window, and what (if anything) to store."""

    messages: list[Message]
    #: Store this: ``summary`` stands for the messages up to ``through`` from now on.
    through: int | None = None
    summary: str | None = None
    facts: list[str] = field(default_factory=list)
    #: Messages left out of the window.
    removed: int = 0
    #: Why summarizing failed (the older part was dropped instead).
    failed: str | None = None

    def describe(self, strategy: str) -> dict[str, Any]:
        return {
            "strategy": strategy,
            "removed": self.removed,
            "kept": len(self.messages),
            "summarized": self.summary is not None,
            "facts": len(self.facts),
            **({"failed": self.failed} if self.failed else {}),
        }


class HistoryProvider(Protocol):
    """Where history comes from, and where a compaction is recorded."""

    async def load(self, session_id: str) -> History: ...

    async def compact(self, session_id: str, *, through: int, summary: str | None) -> None: ...


class CompactionStrategy(Protocol):
    """How a history is fitted into a budget."""

    async def compact(self, history: History, budget: Budget, summarizer: Summarizer | None) -> Compacted: ...


class StoreHistory:
    """The default history provider: the state store. ``loaded``: the history a run
    read already, in the transaction that gave it its session's turn (one read less);
    its first :meth:`load` of that session returns it."""

    def __init__(self, store: StateStore, loaded: History | None = None) -> None:
        self.store = store
        self._loaded = loaded

    async def load(self, session_id: str) -> History:
        loaded, self._loaded = self._loaded, None
        if loaded is not None and loaded.session_id == session_id:
            return loaded
        return await self.store.call(self.store.sessions.history, session_id)

    async def compact(self, session_id: str, *, through: int, summary: str | None) -> None:
        await self.store.call(self.store.sessions.compact, session_id, through=through, summary=summary)


# -- strategies -------------------------------------------------------------------------


def _clean_start(entries: list[Entry], index: int) -> bool:
    """A window may start here: not with a tool result (its call would be cut off)."""
    return entries[index].role != "tool"


def _newest_within(entries: list[Entry], tokens: int) -> int:
    """The index where the newest entries that fit in ``tokens`` start: at a user
    message when one fits (whole exchanges), else at any clean start;
    ``len(entries)`` when not even the last message fits."""
    total, start, user = 0, len(entries), None
    for index in range(len(entries) - 1, -1, -1):
        total += entries[index].tokens
        if total > tokens:
            break
        if _clean_start(entries, index):
            start = index
            if entries[index].role == "user":
                user = index
    return user if user is not None else start


def _window(history: History, start: int, *, summary: bool = True) -> list[Message]:
    head = [summary_message(history.summary)] if summary and history.summary else []
    return head + decode(history.entries[start:])


class Summarize:
    """Seed 004's compaction; see the module docstring."""

    name = "summarize"

    async def compact(self, history: History, budget: Budget, summarizer: Summarizer | None) -> Compacted:
        if history.estimated_tokens() < budget.trigger or not history.entries:
            return Compacted(history.messages())
        start = _newest_within(history.entries, budget.kept)
        if start == 0:
            return Compacted(history.messages())
        old, through = history.entries[:start], history.entries[start - 1].seq
        recent = _window(history, start, summary=False)
        if summarizer is None:
            return Compacted(recent, through=through, removed=start, failed="no summarizer")
        try:
            result = await summarizer([entry.message for entry in old], history.summary)
        except Exception as exc:  # any failure of the model call: drop the old part
            return Compacted(recent, through=through, removed=start, failed=f"{type(exc).__name__}: {exc}")
        return Compacted(
            [summary_message(result.text), *recent],
            through=through,
            summary=result.text,
            facts=list(result.facts),
            removed=start,
        )


class Truncate:
    """Show the newest messages that fit in ``threshold`` of the budget."""

    name = "truncate"

    async def compact(self, history: History, budget: Budget, summarizer: Summarizer | None) -> Compacted:
        if history.estimated_tokens() < budget.trigger:
            return Compacted(history.messages())
        room = budget.trigger - (estimate_text(history.summary) if history.summary else 0)
        start = _newest_within(history.entries, max(0, room))
        return Compacted(_window(history, start), removed=start)


class SlidingWindow:
    """Show the newest ``window_messages`` messages (starting cleanly)."""

    name = "sliding-window"

    def __init__(self, window_messages: int = 40) -> None:
        self.size = window_messages

    async def compact(self, history: History, budget: Budget, summarizer: Summarizer | None) -> Compacted:
        start = max(0, len(history.entries) - self.size)
        while start < len(history.entries) and not _clean_start(history.entries, start):
            start += 1
        return Compacted(_window(history, start), removed=start)


def compaction_options(config: Any) -> dict[str, Any]:
    """``model.compaction`` with defaults filled in, checked (a clear error per key)."""
    if config is not None and not isinstance(config, Mapping):
        raise ConfigError(f"model.compaction must be a mapping, not {type(config).__name__}")
    options = {**DEFAULTS, **(config or {})}
    for key, low, high in (("threshold", 0.0, 1.0), ("keep", 0.0, 1.0)):
        value = options[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not low < value <= high:
            raise ConfigError(
                f"model.compaction.{key} must be a number above {low:g} and at most {high:g}, not {value!r}"
            )
    for key in ("reserve", "stale_turns"):
        value = options[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ConfigError(f"model.compaction.{key} must be a whole number >= 0, not {value!r}")
    if not isinstance(options["during_run"], bool):
        raise ConfigError(f"model.compaction.during_run must be true or false, not {options['during_run']!r}")
    if not isinstance(options["strategy"], str):
        raise ConfigError(f"model.compaction.strategy must be a name, not {options['strategy']!r}")
    return options


def compaction_strategy(options: Mapping[str, Any]) -> CompactionStrategy:
    """The strategy ``options["strategy"]`` names: built in, or an entry point."""
    name = options.get("strategy") or "summarize"
    if name == "summarize":
        return Summarize()
    if name == "truncate":
        return Truncate()
    if name == "sliding-window":
        size = options.get("window_messages", DEFAULTS["window_messages"])
        if not isinstance(size, int) or isinstance(size, bool) or size < 1:
            raise ConfigError(f"model.compaction.window_messages must be a positive integer, not {size!r}")
        return SlidingWindow(size)
    return _plugin("agent_apps.compaction", "model.compaction.strategy", name, dict(options))  # type: ignore[no-any-return]


def reads_store(name: str | None) -> bool:
    """Whether the history provider ``name`` names is the state store's."""
    return not name or name == "store"


def history_provider(name: str | None, store: StateStore, loaded: History | None = None) -> HistoryProvider:
    """The history provider ``name`` names (``store``, the default, given the history
    ``loaded`` already if any; or an entry point)."""
    if not name or reads_store(name):
        return StoreHistory(store, loaded)
    return _plugin("agent_apps.history", "model.history", name, store)  # type: ignore[no-any-return]


def _plugin(group: str, key: str, name: str, argument: Any) -> Any:
    from importlib.metadata import entry_points

    found = [ep for ep in entry_points(group=group) if ep.name == name]
    if not found:
        known = sorted({ep.name for ep in entry_points(group=group)})
        builtin = "summarize, truncate, sliding-window" if group.endswith("compaction") else "store"
        raise ConfigError(
            f"{key}: unknown {name!r} (built in: {builtin}"
            + (f"; installed: {', '.join(known)}" if known else "")
            + f"; packages add more in the entry-point group {group!r})"
        )
    try:
        return found[0].load()(argument)
    except Exception as exc:
        raise ConfigError(f"{key}: {name!r} ({found[0].value}) failed to load: {type(exc).__name__}: {exc}") from exc


# -- stale tool results -----------------------------------------------------------------


def mark_stale(entries: list[Entry], turns: int) -> None:
    """Show tool results older than ``turns`` model turns as one line each
    (``[Summary: Returned 4500 bytes (120 lines) of Python source]``), before any
    strategy sees them: in this window only, the stored messages stay whole. The line
    was made when the message was stored, so stale results are never decoded here."""
    if turns <= 0:
        return
    seen = 0
    for index in range(len(entries) - 1, -1, -1):
        entry = entries[index]
        if entry.role == "assistant":
            seen += 1
        elif entry.role == "tool" and seen >= turns:
            entry.show_stale()


# -- the window -------------------------------------------------------------------------


class PromptWindow:
    """``get_prompt_window(session_id)``: history, compacted and trimmed for a model.

    ``persist``: whether a compaction may be stored (not for runs whose history is not
    kept). ``on_facts`` receives the facts a summary flushed (the workspace's MEMORY.md).
    After each call, :attr:`last` tells what the compaction did.
    """

    def __init__(
        self,
        history: HistoryProvider,
        strategy: CompactionStrategy,
        budget: Budget,
        *,
        summarizer: Summarizer | None = None,
        stale_turns: int = 4,
        persist: bool = True,
        on_facts: Callable[[list[str]], None] | None = None,
    ) -> None:
        self.history = history
        self.strategy = strategy
        self.budget = budget
        self.summarizer = summarizer
        self.stale_turns = stale_turns
        self.persist = persist
        self.on_facts = on_facts
        self.last: Compacted | None = None

    async def get_prompt_window(self, session_id: str) -> list[Message]:
        history = await self.history.load(session_id)
        mark_stale(history.entries, self.stale_turns)
        result = self.last = await self.strategy.compact(history, self.budget, self.summarizer)
        if result.through is not None and self.persist:
            await self.history.compact(session_id, through=result.through, summary=result.summary)
        if result.facts and self.on_facts is not None:
            self.on_facts(result.facts)
        return result.messages
