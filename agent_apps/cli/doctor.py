"""``agent-apps doctor``: is this set-up able to run skills and agents, and if not, what to
fix (imported only for it).

Each check gives ``ok``, ``warning`` (works, but something is missing that you may
want) or ``error`` (broken: what depends on it fails), with a line saying what to do.
Exit status 1 when any check is an error. Nothing is sent over the network: credentials
are looked for, not tried.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from . import EXIT_FAILED, EXIT_OK, _manager, _Parser

if TYPE_CHECKING:
    from . import _Subparsers

#: Each extra and the modules that show it is installed.
EXTRAS = {
    "sandbox": ("wasmtime", "componentize_py"),
    "strands": ("strands", "boto3"),
    "mcp": ("mcp",),
    "acp": ("acp",),
    "scheduler": ("croniter",),
    "otel": ("opentelemetry.sdk",),
    "ray": ("ray",),
}
#: What each provider reads its credentials from (no variable: it needs none).
CREDENTIALS = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}


@dataclass
class Check:
    name: str
    status: str  # ok | warning | error
    message: str
    fix: str = ""


def cmd_doctor(args: argparse.Namespace) -> int:
    from .. import __version__

    cm = _manager(args)
    checks = [_extras(), _sandbox(), _store(), _config(cm), _skills(cm), _provider(cm)]
    if args.json:
        json.dump([asdict(check) for check in checks], sys.stdout, indent=2)
        print()
    else:
        print(f"agent-apps {__version__}, Python {sys.version.split()[0]} ({sys.prefix})")
        for check in checks:
            print(f"  {check.status:<8} {check.name:<12} {check.message}")
            if check.fix:
                print(f"  {'':<8} {'':<12} fix: {check.fix}")
    broken = [check.name for check in checks if check.status == "error"]
    if broken and not args.json:
        print(f"error: {', '.join(broken)}: see the fix above", file=sys.stderr)
    return EXIT_FAILED if broken else EXIT_OK


def _installed(extra: str) -> bool:
    return all(_has(module) for module in EXTRAS[extra])


def _has(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


def _extras() -> Check:
    missing = [extra for extra in EXTRAS if not _installed(extra)]
    there = [extra for extra in EXTRAS if extra not in missing]
    message = f"installed: {', '.join(there) or 'none'}"
    if not missing:
        return Check("extras", "ok", message)
    return Check(
        "extras", "ok", f"{message}; not installed: {', '.join(missing)}",
        f"only if you need them: pip install 'agent-apps[{','.join(missing)}]'",
    )


def _sandbox() -> Check:
    from ..sandbox._build import BUILD_TIME, artifact_path

    if not _installed("sandbox"):
        return Check(
            "sandbox", "error", "the sandbox extra is not installed: agents cannot run code",
            "pip install 'agent-apps[sandbox]'",
        )
    path = artifact_path()
    if not path.exists():
        return Check(
            "sandbox", "warning", f"not built yet: the first agent run builds it ({BUILD_TIME})",
            "agent-apps sandbox build (now, once)",
        )
    try:
        from wasmtime.component import Component

        from ..sandbox._engine import new_engine

        Component.deserialize_file(new_engine(), str(path))
    except Exception as exc:  # a damaged or foreign artifact
        return Check("sandbox", "error", f"{path} cannot be loaded: {exc}", "agent-apps sandbox build --force")
    return Check("sandbox", "ok", f"built, loads ({path})")


def _store() -> Check:
    from ..errors import AgentAppsError
    from ..state import open_store

    try:
        store = open_store()
        runs = len(store.runs.list())
        sessions = len(store.sessions.list())
    except AgentAppsError as exc:
        return Check(
            "state store", "error", str(exc),
            "point AGENT_APPS_STATE (or state.path in the config) at a store that works, or move this one away",
        )
    return Check("state store", "ok", f"{store.path} ({runs} runs, {sessions} sessions)")


def _config(cm: Any) -> Check:
    from ..errors import AgentAppsError

    try:
        cm.config_for(None)
    except AgentAppsError as exc:
        return Check("config", "error", str(exc), "correct that file: `agent-apps config` checks it again")
    files = [layer.source for layer in cm.cascade.base_layers() if layer.source != "defaults"]
    return Check("config", "ok", "files: " + (", ".join(files) if files else "none, the defaults"))


def _skills(cm: Any) -> Check:
    errors = cm.errors
    count = len(cm.skills())
    if errors:
        return Check(
            "skills", "error", f"{len(errors)} could not be loaded, e.g. {errors[0]}",
            "`agent-apps list` shows each, with its file and line",
        )
    return Check("skills", "ok", f"{count} on the search path")


def _provider(cm: Any) -> Check:
    """The configured provider, and what it needs: its extra, its credentials or its command."""
    from ..errors import AgentAppsError

    try:
        resolved = cm.config_for(None)
    except AgentAppsError:
        return Check("provider", "warning", "unknown until the config is correct")
    model = resolved.values.get("model") or {}
    agent, provider = str(model.get("agent") or "agent-strands"), str(model.get("provider") or "bedrock")
    chosen = resolved.sources.get("model.agent") != "defaults"
    broken = "error" if chosen else "warning"
    name = f"{agent} ({provider})" if agent == "agent-strands" else agent
    if agent == "agent-scripted":
        return Check("provider", "ok", f"{name}: the offline scripted model, no credentials needed")
    if agent in ("agent-acp", "agent-kiro"):
        command = model.get("command") or (["kiro-cli"] if agent == "agent-kiro" else None)
        program = (command.split() if isinstance(command, str) else command or [""])[0]
        if not _installed("acp"):
            return Check("provider", broken, f"{name}: the acp extra is not installed", "pip install 'agent-apps[acp]'")
        if not program or shutil.which(program) is None:
            return Check(
                "provider", broken, f"{name}: model.command {program or '(none)'!r} is not on PATH",
                "install the agent CLI, or set model.command",
            )
        return Check("provider", "ok", f"{name}: {shutil.which(program)}")
    if agent != "agent-strands":
        return Check("provider", "ok", f"{name}: a provider of a package, not checked here")
    if not _installed("strands"):
        return Check("provider", broken, f"{name}: the strands extra is not installed", "pip install 'agent-apps[all]'")
    variable = CREDENTIALS.get(provider)
    if variable is not None:
        if model.get("api_key") or os.environ.get(variable):
            source = variable if os.environ.get(variable) else "model.api_key"
            return Check("provider", "ok", f"{name}: credentials in {source}")
        return Check("provider", broken, f"{name}: no {variable}", f"export {variable}=...")
    if provider != "bedrock":
        return Check("provider", "ok", f"{name}: needs no credentials (model.base_url: {model.get('base_url')})")
    import boto3

    session = boto3.Session()
    if session.get_credentials() is None:
        return Check(
            "provider", broken, f"{name}: no AWS credentials found (the default provider: Amazon Bedrock)",
            "aws configure (or AWS_PROFILE / AWS_ACCESS_KEY_ID), or choose another provider: docs/providers.md; "
            "the bundled examples run offline with agent-scripted",
        )
    region = model.get("region") or session.region_name
    return Check("provider", "ok", f"{name}: AWS credentials found, region {region or '(none: us-west-2)'}")


def _doctor_parser(sub: _Subparsers, common: _Parser) -> None:
    p = sub.add_parser(
        "doctor", parents=[common], help="check the set-up and say what to fix",
        description="Check the extras, the sandbox build, the state store, the config files, the skills and "
        "the configured model provider (its extra, credentials or command), and say what to fix. Exit "
        "status 1 when something is broken. Nothing goes over the network.",
    )
    p.add_argument("--json", action="store_true", help="JSON output: one object per check")
    p.set_defaults(run=cmd_doctor)
