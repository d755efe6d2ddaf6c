"""``agent-apps console``: serve the console until Ctrl-C (imported only for it).

It opens the state store the other commands use, binds the address (loopback unless
``--host`` says otherwise; by default port 8765, or the next free one), prints the
address with a new token on stdout, and serves. Ctrl-C stops it with status 0, after
the worker processes it started to resume runs were stopped.
"""

from __future__ import annotations

import argparse
import errno
import ipaddress
import secrets
import socket
import sys

from ..cli import UsageError, _Parser

__all__ = ["DEFAULT_PORT", "parse", "parser"]

#: The port tried first when ``--port`` is not given (then the next ones, up to 20).
DEFAULT_PORT = 8765
_TRIES = 20


def parse(argv: list[str]) -> argparse.Namespace:
    """Parse ``console ...``; the namespace's ``run`` carries it out."""
    args = parser().parse_args(argv[1:])
    args.command = "console"
    args.run = run
    return args


def parser() -> argparse.ArgumentParser:
    """The parser of ``console`` (also the shell's completion of it)."""
    parser = _Parser(
        prog="agent-apps console",
        description="Serve a local web page over the state store: runs, what each did turn by turn (live while "
        "it runs), approvals, sessions and schedules. Prints its address with a token.",
    )
    parser.add_argument(
        "--host", default="127.0.0.1", metavar="ADDRESS", help="the address to serve on (default 127.0.0.1, loopback)"
    )
    parser.add_argument(
        "--port", type=_port, default=None, metavar="N",
        help=f"the port (default {DEFAULT_PORT}, or the next free one; 0: any free port)",
    )  # fmt: skip
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    return parser


def _port(text: str) -> int:
    if not text.isdigit() or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"must be a port number from 0 to 65535, not {text!r}")
    return int(text)


def _address(host: str) -> tuple[str, bool]:
    """The address to bind ``host`` to, and whether it is loopback (refusing a wildcard
    or a name: the console answers only requests for the very address it serves)."""
    if host == "localhost":
        return "127.0.0.1", True
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        raise UsageError(f"--host {host}: give an IP address (or localhost), not a name") from None
    if address.is_unspecified:
        raise UsageError(
            f"--host {host}: the console answers only requests for the address it serves: give the one clients "
            "will use (e.g. --host 192.168.1.20)"
        )
    return str(address), address.is_loopback


def _bind(address: str, port: int | None) -> socket.socket:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    ports = [port] if port is not None else list(range(DEFAULT_PORT, DEFAULT_PORT + _TRIES))
    for number in ports:
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((address, number))
        except OSError as exc:
            sock.close()
            if exc.errno == errno.EADDRINUSE and number != ports[-1]:
                continue
            raise UsageError(f"cannot serve on {address}:{number}: {exc.strerror}") from None
        sock.listen(128)  # connections wait in the backlog until the server takes them
        return sock
    raise AssertionError("unreachable")  # pragma: no cover


def run(args: argparse.Namespace) -> int:
    from ..state import MEMORY, open_store

    store = open_store()
    if store.path == MEMORY:
        raise UsageError("the console needs a state store in a file, not :memory: (set AGENT_APPS_STATE)")
    store.runs.latest()  # open it now: a store that cannot be read is an error before anything is served
    address, loopback = _address(args.host)
    sock = _bind(address, args.port)
    port = sock.getsockname()[1]
    shown = f"[{address}]" if ":" in address else address
    hosts = {f"{shown}:{port}"}
    if loopback:
        hosts.add(f"localhost:{port}")

    try:
        import uvicorn

        from .app import Console, create_app
    except ImportError as exc:
        needs = "the console needs Starlette and uvicorn: pip install 'agent-apps[console]'"
        raise UsageError(f"{needs} ({exc})") from None
    from .workers import Workers

    token = secrets.token_urlsafe(24)
    console = Console(store, token, Workers(store.db.location))  # the password too, for a URL
    app = create_app(console, hosts=hosts, cookie=f"agent_apps_console_{port}")
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on", timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    console.stopping = lambda: bool(server.should_exit)
    note = "" if loopback else " (serving to the network over plain HTTP: only on a network you trust)"
    try:  # from the moment the address is out, Ctrl-C is how it stops
        print(f"agent-apps console: http://{shown}:{port}/?token={token}", flush=True)
        print(f"  store {store.path}; Ctrl-C stops it{note}", file=sys.stderr, flush=True)
        server.run(sockets=[sock])
    except KeyboardInterrupt:  # before uvicorn took over the signal, or handed back by it once stopped
        pass
    finally:
        sock.close()
        store.close()
    print("agent-apps console: stopped", file=sys.stderr)
    return 0
