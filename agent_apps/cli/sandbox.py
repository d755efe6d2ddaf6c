"""``agent-apps sandbox build``: build the sandbox component ahead of its first use
(imported only for it)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from . import EXIT_OK, _Parser, _start_done

if TYPE_CHECKING:
    from . import _Subparsers


def cmd_sandbox_build(args: argparse.Namespace) -> int:
    from ..sandbox import build

    _start_done()
    path = build(force=args.force)
    print(path)
    return EXIT_OK


def _sandbox_parser(sub: _Subparsers, common: _Parser) -> None:
    p = sub.add_parser("sandbox", help="manage the WebAssembly sandbox")
    sandbox = p.add_subparsers(dest="sandbox_command", metavar="ACTION", required=True)
    p = sandbox.add_parser(
        "build", parents=[common], help="build and compile the sandbox component now (else: on first use)"
    )
    p.add_argument("--force", action="store_true", help="rebuild even if a cached component exists")
    p.set_defaults(run=cmd_sandbox_build)
