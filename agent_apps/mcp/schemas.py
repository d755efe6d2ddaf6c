"""A skill as an MCP tool, as both ends of agent-apps see it on the wire.

The tool's input schema is the skill's ``params`` and its output schema the skill's
``metadata.returns``. MCP structured content is a JSON object, so a result that is not
one travels wrapped as ``{"result": value}``, marked (:data:`WRAPPED`) so that an
agent-apps client unwraps it. A callback ref is served under a tool name MCP allows
(:func:`tool_name_for_ref`). Nothing here imports ``mcp``: the client reads these rules
before it knows whether ``mcp`` is installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..skill import Skill

__all__ = ["CALLBACK_SCHEME", "EMPTY_PARAMS", "WRAPPED", "output_schema", "structured", "tool_name_for_ref"]

CALLBACK_SCHEME = "callback://"
EMPTY_PARAMS: dict[str, Any] = {"type": "object", "properties": {}}
#: Result metadata marking structured content wrapped as ``{"result": value}``.
WRAPPED = "agent-apps/wrapped"
_WRAP_NOTE = 'The skill\'s result, wrapped as {"result": value} because MCP structured content is a JSON object.'


def _object_schema(schema: Any) -> bool:
    return isinstance(schema, dict) and schema.get("type") == "object"


def output_schema(returns: dict[str, Any] | None) -> dict[str, Any] | None:
    """The MCP output schema for a skill's ``metadata.returns``."""
    if returns is None:
        return None
    if _object_schema(returns):
        return returns
    return {
        "type": "object",
        "description": _WRAP_NOTE,
        "properties": {"result": returns},
        "required": ["result"],
        WRAPPED: True,  # an unknown keyword to validators; our client unwraps by it
    }


def structured(skill: Skill, value: Any) -> dict[str, Any]:
    """The structured content for a result: the value itself for object ``returns``,
    else ``{"result": value}``."""
    if _object_schema(skill.returns) and isinstance(value, dict):
        return value
    return {"result": value}


def tool_name_for_ref(ref: str) -> str:
    """The MCP tool name of a ref: a skill name as is; ``callback://NAME.TOKEN`` as
    ``NAME.TOKEN`` (MCP tool names use ``[A-Za-z0-9._-]``). The server also accepts
    the ref itself as the tool name."""
    return ref[len(CALLBACK_SCHEME) :] if ref.startswith(CALLBACK_SCHEME) else ref
