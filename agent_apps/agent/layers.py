"""The system prompt as named layers: :class:`ContextRegistry`.

Each part of what the model reads first (the role, the workspace files, the rules, the
skill stubs, retrieved memory, the task) is a :class:`Layer` with a name, a priority
(lower comes first), tags, an owner, and whether it is **stable**: the same from one
run of the skill to the next. Composing sorts the layers by priority and joins their
text; the **stable prefix** is every layer up to the first one that is not stable.

Why: a model provider that caches prompt prefixes (Amazon Bedrock and Anthropic cache
points) only re-reads what changed, so everything that stays the same must come first
and be byte-for-byte the same each time. The built-in priorities keep stable layers
below 100 and dynamic ones at 100 and above; a plugin can add layers of its own (see
``agent_apps_context`` in :mod:`agent_apps.plugins`).

A registry may have a **parent**: a sub-agent's is the registry of the agent whose code
started it. A layer of the child replaces the parent's layer of its name (the parent's
layers are not in the child's prompt), unless it says ``merge_parent``: then the
parent's text of that name comes first and its own after (seed 003's ``mergeParent``:
additive, not override). A layer's ``metadata`` is the owner's own (shown with the
layer in the run's ``context``, never in the prompt).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..context import Context

__all__ = ["DYNAMIC", "LAYERS", "Composed", "ContextRegistry", "Layer", "enclosing"]

#: The first priority of the dynamic band: stable layers go below it.
DYNAMIC = 100
#: Where an agent run keeps its registry: an internal of its invocation (never seen by
#: the skills below it), which the agents below it find as their parent.
LAYERS = "agent_layers"
_SEPARATOR = "\n"


@dataclass(frozen=True)
class Layer:
    """One named part of the system prompt."""

    name: str
    text: str
    priority: int
    #: The same from run to run (cacheable): role, rules, stubs; not memory or the task.
    stable: bool = True
    tags: tuple[str, ...] = ("system",)
    #: Who wrote it: ``agent`` for the built-in layers, a plugin's name for its own.
    owner: str = "agent"
    #: Added to the parent registry's layer of this name, not in its place (see above).
    merge_parent: bool = False
    #: The owner's data about the layer (not in the prompt).
    metadata: Mapping[str, Any] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class Composed:
    """A composed prompt: its text, where its stable prefix ends, and the layers in it."""

    text: str
    #: ``text[:stable_prefix]`` is the stable part (the end of its last stable layer).
    stable_prefix: int
    layers: tuple[Layer, ...] = field(default=())

    @property
    def stable(self) -> str:
        return self.text[: self.stable_prefix]

    def describe(self) -> list[dict[str, object]]:
        """Name, owner, size and stability of each layer (for ``ctx.locals["agent"]``)."""
        described: list[dict[str, object]] = []
        for layer in self.layers:
            entry: dict[str, object] = {"name": layer.name, "owner": layer.owner, "priority": layer.priority,
                                        "stable": layer.stable, "chars": len(layer.text)}  # fmt: skip
            if layer.merge_parent:
                entry["merge_parent"] = True
            if layer.metadata:
                entry["metadata"] = dict(layer.metadata)
            described.append(entry)
        return described


class ContextRegistry:
    """Named layers; setting a name again replaces that layer. ``parent``: the registry
    whose layers this one's ``merge_parent`` layers add to (see the module docstring)."""

    def __init__(self, layers: Iterable[Layer] = (), *, parent: ContextRegistry | None = None) -> None:
        self._layers: dict[str, Layer] = {}
        self.parent = parent
        for layer in layers:
            self.set(layer)

    def set(self, layer: Layer) -> None:
        self._layers[layer.name] = layer

    def add(
        self,
        name: str,
        text: str,
        *,
        priority: int,
        stable: bool = True,
        tags: Iterable[str] = ("system",),
        owner: str = "agent",
        merge_parent: bool = False,
        metadata: Mapping[str, Any] | None = None,
    ) -> Layer:
        """Set the layer ``name`` (an empty text removes it: an absent file, a section
        switched off by config)."""
        layer = Layer(name, text, priority, stable, tuple(tags), owner, merge_parent, dict(metadata or {}))
        if text.strip():
            self.set(layer)
        else:
            self.remove(name)
        return layer

    def remove(self, name: str) -> None:
        self._layers.pop(name, None)

    def get(self, name: str) -> Layer | None:
        return self._layers.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._layers

    def layers(self, tag: str | None = "system") -> list[Layer]:
        """The layers with ``tag`` (None: all), in order: priority, then name; a
        ``merge_parent`` layer with the parent's text of its name before its own."""
        chosen = [self._merged(layer) for layer in self._layers.values() if tag is None or tag in layer.tags]
        return sorted(chosen, key=lambda layer: (layer.priority, layer.name))

    def _merged(self, layer: Layer) -> Layer:
        """``layer``, after the parent's layer of its name when it merges with it."""
        if not layer.merge_parent or self.parent is None:
            return layer
        above = self.parent.layers(None)
        inherited = next((p for p in above if p.name == layer.name), None)
        if inherited is None:
            return layer
        return replace(layer, text=inherited.text.strip("\n") + "\n\n" + layer.text.strip("\n"))

    def compose(self, tag: str | None = "system") -> Composed:
        """Join the layers' texts (each ends with a newline) in order."""
        parts: list[str] = []
        stable_end: int | None = None
        size = 0
        layers = self.layers(tag)
        for layer in layers:
            if not layer.stable and stable_end is None:
                stable_end = size
            text = layer.text.strip("\n") + "\n"
            if parts:
                text = _SEPARATOR + text
            parts.append(text)
            size += len(text)
        text = "".join(parts)
        return Composed(text, size if stable_end is None else stable_end, tuple(layers))


def enclosing(ctx: Context) -> ContextRegistry | None:
    """The registry of the nearest agent run above the invocation ``ctx`` (the parent of
    an agent run's own), or None."""
    node = ctx.parent
    while node is not None:
        found = node.internals.get(LAYERS)
        if isinstance(found, ContextRegistry):
            return found
        node = node.parent
    return None
