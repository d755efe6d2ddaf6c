"""Run a shell command: minimal environment, capped output, group-killing timeout."""

import shutil

from agent_apps.tools import PermissionDenied, path_policy, security_for
from agent_apps.tools.blocklist import blocked
from agent_apps.tools.commands import check_command
from agent_apps.tools.subprocess import build_env, run

frontmatter = {
    "name": "shell",
    "description": "Run a shell command (bash, else sh) in the workspace and return its exit code, "
    "stdout and stderr. The environment holds only PATH, HOME, USER, LANG, LC_ALL, TERM, SHELL, "
    "TMPDIR, TZ (plus security.env). Output is capped at security.output_kb (200 KB); the command "
    "is killed with everything it started after 'timeout' seconds (at most security.timeout, 120). "
    "Catastrophic commands (sudo, rm -rf /, mkfs or dd onto a device, shutdown, chmod 777, ...) are refused; "
    "destructive ones (rm, git push --force, dd, chmod -R, truncate, > over an existing file, ...) are admin "
    "calls, which the policy asks a human about.",
    "params": {
        "type": "object",
        "properties": {
            "command": {"type": "string", "minLength": 1, "maxLength": 100000},
            "cwd": {"type": "string", "maxLength": 4096, "description": "working directory (default: the workspace)"},
            "timeout": {"type": "number", "exclusiveMinimum": 0, "description": "seconds; capped by security.timeout"},
        },
        "required": ["command"],
        "additionalProperties": False,
    },
    "metadata": {
        "category": "write",
        "shell_arg": "command",  # a destructive line makes the call admin (agent_apps/tools/destructive.py)
        "tags": ["shell"],
        "returns": {
            "type": "object",
            "properties": {
                "exit_code": {"type": "integer"},
                "stdout": {"type": "string"},
                "stderr": {"type": "string"},
                "truncated": {"type": "boolean"},
            },
            "required": ["exit_code", "stdout", "stderr"],
        },
    },
}


async def main(ctx, args):
    command = args["command"]
    reason = blocked(command)
    if reason is not None:
        raise PermissionDenied(
            "shell", f"command refused: {reason}", rule="shell blocklist (defence in depth)", resource=command
        )
    check_command(ctx, command)
    security = security_for(ctx)
    policy = path_policy(ctx)
    cwd = policy.check("shell", args["cwd"]) if args.get("cwd") else policy.workspace
    env = build_env(security.get("env") or [])
    shell = shutil.which("bash", path=env.get("PATH")) or "/bin/sh"
    ceiling = float(security["timeout"])
    result = await run(
        [shell, "-c", command],
        env=env,
        cwd=cwd,
        timeout=min(float(args.get("timeout", ceiling)), ceiling),
        output_limit=int(security["output_kb"]) * 1024,
        signal=ctx.signal,
        name="shell",
    )
    return result.to_json()
