"""``agent-apps mcp``: serve the skills over MCP (imported only for it)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from . import EXIT_OK, UsageError, _manager, _Parser, _start_done

if TYPE_CHECKING:
    from . import _Subparsers


def cmd_mcp(args: argparse.Namespace) -> int:
    """Serve the visible skills over MCP: stdio by default, streamable HTTP with --http."""
    try:
        import anyio

        from ..mcp import transports as mcp_transports
    except ImportError as exc:
        raise UsageError(f"'agent-apps mcp' needs the mcp package: pip install 'agent-apps[mcp]' ({exc})") from None
    cm = _manager(args)
    _start_done()
    if args.http is None:
        anyio.run(mcp_transports.serve_stdio, cm)
        return EXIT_OK
    host, sep, port = args.http.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", args.http
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise UsageError(f"--http {args.http}: expected HOST:PORT or PORT, with a port from 0 to 65535")
    token = os.environ.get("AGENT_APPS_MCP_TOKEN") or None
    if not token and host not in ("127.0.0.1", "localhost", "::1"):
        raise UsageError(
            f"--http {args.http} would serve every skill to the network without authentication: "
            "set AGENT_APPS_MCP_TOKEN (clients then send 'Authorization: Bearer <token>')"
        )

    def ready(url: str) -> None:
        auth = " (Authorization: Bearer $AGENT_APPS_MCP_TOKEN required)" if token else ""
        print(f"agent-apps: serving MCP on {url}{auth}", file=sys.stderr, flush=True)

    anyio.run(lambda: mcp_transports.serve_http(cm, host, int(port), path=args.http_path, token=token, ready=ready))
    return EXIT_OK


def _mcp_parser(sub: _Subparsers, common: _Parser) -> None:
    p = sub.add_parser("mcp", parents=[common], help="serve the skills as MCP tools (stdio, or --http)")
    p.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="serve streamable HTTP on HOST:PORT (HOST defaults to 127.0.0.1) instead of stdio; "
        "set AGENT_APPS_MCP_TOKEN to require a bearer token",
    )
    p.add_argument("--http-path", default="/mcp", metavar="PATH", help="the HTTP endpoint path (default /mcp)")
    p.set_defaults(run=cmd_mcp)
