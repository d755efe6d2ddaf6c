"""``python -m agent_apps.sandbox build [--force]``: build the component ahead of time."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agent_apps.sandbox")
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build and compile the sandbox component into the cache")
    b.add_argument("--force", action="store_true", help="rebuild even if a cached component exists")
    sub.add_parser("path", help="print where the compiled component is (or would be) cached")
    args = parser.parse_args(argv)
    from . import _build

    if args.cmd == "build":
        path = _build.build(force=args.force)
        print(path)
    else:
        print(_build.artifact_path())
    return 0


if __name__ == "__main__":
    sys.exit(main())
