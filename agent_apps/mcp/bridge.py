"""A stdio MCP server that forwards every request to an HTTP one.

``python -m agent_apps.mcp.bridge`` serves, over its stdin and stdout, the tools of the
streamable-HTTP endpoint in ``$AGENT_APPS_MCP_URL`` (bearer token in
``$AGENT_APPS_MCP_TOKEN``, as :meth:`Endpoint.to_env` gives them). It is how a program
that can start only stdio MCP servers (an ACP agent CLI without
``mcpCapabilities.http``) reaches refs exposed with :func:`expose_refs`.

The program that starts the bridge may put it in a session of its own (the MCP SDK's
stdio client does), out of reach of the run's process group. So with
``$AGENT_APPS_MCP_ALIVE`` (a folder) set, the bridge and the run keep track of each other
through locks on files in it (the kernel frees a lock when its process ends, however it
ends):

1. the run holds ``run.lock`` (:func:`hold_run_lock`) until the program that starts
   bridges is gone;
2. a bridge locks a file of its own there, writes its pid in it, then looks at
   ``run.lock``: free, the run is over and the bridge ends at once; else it serves, and
   holds its lock for as long as it lives (:func:`hold_alive_lock`);
3. the run, once the program is gone, frees ``run.lock``, then waits for the lock of
   every bridge's file, and signals a bridge that stays.

A bridge that looks after step 3 began ends; one that looked before holds its lock
already, and step 3 waits for it.
"""

from __future__ import annotations

import os
from typing import Any

import anyio

#: The folder where the run and each bridge hold their locks.
ALIVE_ENV = "AGENT_APPS_MCP_ALIVE"
#: The run's lock in that folder (each bridge's is ``bridge-PID.pid``).
RUN_LOCK = "run.lock"


async def bridge(url: str, token: str) -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.server import Server
    from mcp.server.stdio import stdio_server

    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=None)) as http:
        async with Client(streamable_http_client(url, http_client=http)) as remote:

            async def list_tools(ctx: Any, params: Any) -> Any:
                return await remote.list_tools()

            async def call_tool(ctx: Any, params: Any) -> Any:
                return await remote.call_tool(params.name, dict(params.arguments or {}))

            server: Server[Any] = Server("agent-apps-bridge", on_list_tools=list_tools, on_call_tool=call_tool)
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())


def hold_run_lock(folder: str) -> int:
    """Lock ``run.lock`` in ``folder`` for the run; returns the descriptor to close when
    no bridge may start any more."""
    import fcntl

    fd = os.open(os.path.join(folder, RUN_LOCK), os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def hold_alive_lock(folder: str) -> int | None:
    """Lock a file of this bridge's own in ``folder`` for as long as the process lives;
    returns its descriptor, or None when the run is over (``run.lock`` free, or the folder
    gone): nobody would call through this bridge."""
    import fcntl

    try:
        fd = os.open(os.path.join(folder, f"bridge-{os.getpid()}.pid"), os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, str(os.getpid()).encode())
        run = os.open(os.path.join(folder, RUN_LOCK), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(run, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return fd  # the run holds it: it goes on
    finally:
        os.close(run)
    os.close(fd)
    return None


def main() -> None:
    folder = os.environ.get(ALIVE_ENV)
    if folder and hold_alive_lock(folder) is None:
        return  # the run is over: nobody would ever call through this bridge
    anyio.run(bridge, os.environ["AGENT_APPS_MCP_URL"], os.environ["AGENT_APPS_MCP_TOKEN"])


if __name__ == "__main__":
    main()
