"""What a mounted MCP server may send agent-apps (docs/security.md, "What a peer can do").

* **Answers it cannot read fail their request at once.** The ``mcp`` library parses
  each line a stdio server writes; one it cannot parse (a result nested 200,000 deep
  passes the line's size checks) it logs and drops, and the call it answers would wait
  for ever (or until ``timeout``). :func:`readable_answers` reads the id such an answer
  carries (:func:`agent_apps._json.top_level_scalar`) and answers that call with an
  error saying why.
* **Redirects stay on the server's own host.** The library's HTTP client follows
  redirects, with the server's ``headers`` (a token in ``X-Api-Key`` is sent as is).
  :func:`same_origin_redirects` refuses a redirect to another host, port or scheme
  (``http`` to ``https`` on the same host is allowed).
* **Tool text is capped** before it can reach a prompt (:func:`capped_tool`): its
  description, its name, its schemas.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from .. import _json
from .server_log import current_log

__all__ = ["CappedTool", "RedirectRefused", "ToolLimits", "capped_tool", "readable_answers", "same_origin_redirects"]


# -- answers the library cannot read -------------------------------------------------------


@contextlib.asynccontextmanager
async def readable_answers(transport: Any) -> AsyncIterator[Any]:
    """``transport`` (an MCP transport: an async context manager of its read and write
    streams) whose unreadable answers become error answers to their requests."""
    import anyio
    from mcp.shared.message import SessionMessage

    async with transport as (read, write):
        sender, receiver = anyio.create_memory_object_stream[Any](0)

        async def forward() -> None:
            async with sender:
                async for item in read:
                    if isinstance(item, Exception):
                        answer = _error_answer(item)
                        if answer is None:
                            continue  # not an answer (the library has logged it): nothing waits for it
                        item = SessionMessage(answer)
                    try:
                        await sender.send(item)
                    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                        return

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(forward)
            try:
                yield receiver, write
            finally:
                tasks.cancel_scope.cancel()


def _error_answer(error: Exception) -> Any:
    """The JSON-RPC error answer for a line the library could not parse, when that line
    answers a request (it has an ``id`` and no ``method``), else None."""
    import mcp_types as types

    line = _unparsed_line(error)
    if line is None:
        return None
    request = _json.top_level_scalar(line, "id")
    if not isinstance(request, (int, str)) or _json.top_level_scalar(line, "method") is not None:
        return None
    try:
        _json.loads(line)
        reason = f"it is not a valid JSON-RPC message ({_first_line(error)})"
    except ValueError as exc:
        reason = str(exc)
    log = current_log.get()
    if log is not None:
        log.write(f"agent-apps: could not read the answer to request {request!r}: {reason}\n".encode(), tail=False)
    message = f"agent-apps could not read the server's answer: {reason}"
    return types.JSONRPCError(jsonrpc="2.0", id=request, error=types.ErrorData(code=-32700, message=message))


def _unparsed_line(error: Exception) -> str | None:
    """The text a parse error was about (pydantic keeps it as the error's input)."""
    errors = getattr(error, "errors", None)
    if errors is None:
        return None
    try:
        details = errors(include_url=False)
    except Exception:  # not a pydantic ValidationError after all
        return None
    found = next((d.get("input") for d in details if d.get("type") == "json_invalid"), None)
    return found if isinstance(found, str) else None


def _first_line(error: Exception) -> str:
    text = str(error).strip().splitlines()
    return text[-1][:200] if text else type(error).__name__


# -- redirects -------------------------------------------------------------------------------


class RedirectRefused(Exception):
    """A mounted server redirected a request to another host, port or scheme."""


async def same_origin_redirects(response: Any) -> None:
    """An HTTP client's response hook: refuse to follow a redirect off the server's origin."""
    if not response.has_redirect_location:
        return
    source = urlsplit(str(response.request.url))
    target = urlsplit(str(response.request.url.join(response.headers["location"])))
    same = (source.scheme, source.hostname, source.port) == (target.scheme, target.hostname, target.port)
    upgrade = source.scheme == "http" and target.scheme == "https" and source.hostname == target.hostname
    if not (same or upgrade):
        shown = target.geturl()[:200]
        raise RedirectRefused(
            f"the server redirected to {shown}, off its own host: agent-apps follows a mounted server's redirects "
            "only on its host (its headers, your token among them, would go along); set its url to the address "
            "you mean"
        )


# -- tool text --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolLimits:
    """``mcp_servers.SERVER``'s caps on what one tool may add to a prompt."""

    #: ``description_chars``: the characters of its description kept.
    description_chars: int = 2000
    #: ``schema_kb``: its input and output schemas, as JSON, at most (else not mounted).
    schema_kb: int = 64
    #: The longest skill name (the Agent Skills limit): a longer one is cut.
    name_chars: int = 64

    @classmethod
    def of(cls, spec: dict[str, Any]) -> ToolLimits:
        values = {key: int(spec[key]) for key in ("description_chars", "schema_kb") if spec.get(key) is not None}
        return cls(**{key: max(1, value) for key, value in values.items()})


@dataclass
class CappedTool:
    """One tool's text, capped: what to mount, what was cut (warnings), or why not."""

    description: str
    input_schema: Any
    output_schema: Any
    warnings: list[str] = field(default_factory=list)
    #: Why the tool is not mounted (its schemas are too large), else None.
    refused: str | None = None


def shown_name(name: str) -> str:
    """A peer's name for a message: at most 60 characters."""
    return name if len(name) <= 60 else name[:59] + "…"


def capped_tool(tool: Any, server: str, limits: ToolLimits, *, key: str) -> CappedTool:
    """``tool``'s description and schemas within ``limits``; ``key`` is the config key
    of the server (``mcp_servers.NAME``), which the warnings name."""
    where = f"MCP server {server!r}, tool {shown_name(str(tool.name))!r}"
    capped = CappedTool(tool.description or "", tool.input_schema, tool.output_schema)
    if len(capped.description) > limits.description_chars:
        capped.warnings.append(
            f"{where}: its description has {len(capped.description):,} characters; the first "
            f"{limits.description_chars:,} are kept ({key}.description_chars)"
        )
        capped.description = capped.description[: limits.description_chars - 1] + "…"
    size = _json_size(capped.input_schema) + _json_size(capped.output_schema)
    if size > limits.schema_kb * 1024:
        capped.refused = (
            f"{where} is not mounted: its schemas take {-(-size // 1024):,} KB, past {key}.schema_kb "
            f"({limits.schema_kb})"
        )
    return capped


def _json_size(value: Any) -> int:
    if value is None:
        return 0
    try:
        return len(json.dumps(value, default=str))
    except (ValueError, RecursionError):  # a circular or absurdly deep schema: too large
        return 1 << 40
