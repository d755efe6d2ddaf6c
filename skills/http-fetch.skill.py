"""Fetch a URL over http(s) with a size cap and a timeout (no new dependency: urllib)."""

import asyncio

from agent_apps.errors import AgentAppsError
from agent_apps.tools import security_for
from agent_apps.tools.http import fetch

frontmatter = {
    "name": "http-fetch",
    "description": "Fetch an http(s) URL with GET (or HEAD) and return the status, content type and "
    "text body. Bodies are capped at max_kb (default and ceiling: security.http.max_kb, 1024); "
    "binary bodies are not returned. Private and loopback addresses are refused unless "
    "security.http.allow_private is true.",
    "params": {
        "type": "object",
        "properties": {
            "url": {"type": "string", "pattern": "^[hH][tT][tT][pP][sS]?://", "maxLength": 8192},
            "method": {"enum": ["GET", "HEAD"], "default": "GET"},
            "headers": {
                "type": "object",
                "additionalProperties": {"type": "string", "maxLength": 8192},
                "maxProperties": 32,
            },
            "max_kb": {"type": "integer", "minimum": 1},
            "timeout": {"type": "number", "exclusiveMinimum": 0},
        },
        "required": ["url"],
        "additionalProperties": False,
    },
    "metadata": {
        "category": "read",
        "tags": ["network"],
        "returns": {
            "type": "object",
            "properties": {
                "url": {"type": "string"},
                "status": {"type": "integer"},
                "content_type": {"type": "string"},
                "body": {"type": ["string", "null"]},
                "truncated": {"type": "boolean"},
            },
            "required": ["url", "status", "body"],
        },
    },
}


async def main(ctx, args):
    http = security_for(ctx)["http"]
    max_kb = min(args.get("max_kb", http["max_kb"]), http["max_kb"])
    timeout = min(float(args.get("timeout", http["timeout"])), float(http["timeout"]))
    try:
        result = await asyncio.to_thread(
            fetch,
            args["url"],
            method=args["method"],
            headers=args.get("headers"),
            timeout=timeout,
            max_bytes=int(max_kb) * 1024,
            allow_private=bool(http.get("allow_private")),
        )
    except (OSError, ValueError) as exc:
        raise AgentAppsError(f"http-fetch: cannot fetch {args['url']}: {exc}", skill="http-fetch") from None
    return result.to_json()
