"""The shell tool and the subprocess runner: S6.3-S6.6, S6.13, hung processes,
grandchildren, cancellation."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from tools_helpers import INTERACTIVE, security

from agent_apps import Cancelled, LimitExceeded, Signal
from agent_apps.tools import PermissionDenied, approval
from agent_apps.tools.subprocess import build_env, run

pytestmark = pytest.mark.anyio
PY = sys.executable


def gone(pid: int) -> bool:
    """True once ``pid`` no longer runs (exited, or a zombie waiting for its reaper)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False
    return state in ("Z", "X")


async def wait_gone(pid: int) -> bool:
    """Poll until the process is gone (the kill is asynchronous); never a timing claim."""
    for _ in range(500):
        if gone(pid):
            return True
        await asyncio.sleep(0.02)
    return gone(pid)


async def test_shell_runs_a_command(cm, workspace):  # S6.1
    (workspace / "a.txt").write_text("hello")
    result = await cm.invoke("shell", {"command": "cat a.txt; echo; echo err >&2; exit 3"}, config=INTERACTIVE)
    assert result == {"exit_code": 3, "stdout": "hello\n", "stderr": "err\n", "truncated": False}


async def test_runaway_output_is_truncated_with_a_notice(cm):  # S6.3
    command = f"{PY} -c \"import sys; sys.stdout.write('x' * 3000000)\""
    result = await cm.invoke("shell", {"command": command}, config=security(output_kb=64))
    assert result["truncated"] is True and result["exit_code"] == 0
    body, notice = result["stdout"][: 64 * 1024], result["stdout"][64 * 1024 :]
    assert body == "x" * 64 * 1024
    assert "output truncated by agent-apps: kept 65536 of 3000000 bytes" in notice


async def test_default_output_cap_is_200_kb(cm):
    result = await cm.invoke("shell", {"command": f"{PY} -c \"print('y' * 300000)\""}, config=INTERACTIVE)
    assert (
        result["truncated"]
        and result["stdout"].startswith("y" * 200 * 1024)
        and "kept 204800 of 300001" in result["stdout"]
    )


async def test_endless_output_is_stopped_by_the_timeout(cm):
    with pytest.raises(LimitExceeded, match="timed out after 0.5 s") as info:
        await cm.invoke("shell", {"command": "yes", "timeout": 0.5}, config=security(output_kb=4))
    assert "output so far" in str(info.value)


async def test_timeout_kills_the_whole_process_group(cm, workspace):  # S6.4
    command = "sleep 1000 & echo $! > child.pid; (sleep 1000 & echo $! > grandchild.pid; wait) & wait"
    with pytest.raises(LimitExceeded, match="timed out after 1 s; its process group was killed"):
        await cm.invoke("shell", {"command": command, "timeout": 1}, config=INTERACTIVE)
    for name in ("child.pid", "grandchild.pid"):
        pid = int((workspace / name).read_text())
        assert await wait_gone(pid), f"{name} {pid} survived the timeout"


async def test_processes_left_behind_are_killed_when_the_command_exits(cm, workspace):
    result = await cm.invoke("shell", {"command": "sleep 1000 > /dev/null 2>&1 & echo $!"}, config=INTERACTIVE)
    assert await wait_gone(int(result["stdout"]))


async def test_the_timeout_param_cannot_exceed_the_configured_ceiling(cm, workspace):
    with pytest.raises(LimitExceeded, match="timed out after 1 s"):
        await cm.invoke("shell", {"command": "sleep 1000", "timeout": 9999}, config=security(timeout=1))


async def test_cancelling_the_signal_kills_the_process_group(cm, workspace):
    signal = Signal()
    task = asyncio.ensure_future(
        cm.invoke("shell", {"command": "sleep 1000 & echo $! > bg.pid; sleep 1000"}, config=INTERACTIVE, signal=signal)
    )
    pid_file = workspace / "bg.pid"
    for _ in range(500):
        if pid_file.exists() and pid_file.read_text().strip():
            break
        await asyncio.sleep(0.02)
    signal.cancel("user pressed stop")
    with pytest.raises(Cancelled, match="user pressed stop"):
        await task
    assert await wait_gone(int(pid_file.read_text()))


async def test_cancelling_the_task_kills_the_process(tmp_path):
    pid_file = tmp_path / "pid"
    task = asyncio.ensure_future(
        run(["/bin/sh", "-c", f"echo $$ > {pid_file}; exec sleep 1000"], env=build_env(), timeout=600)
    )
    for _ in range(500):
        if pid_file.exists() and pid_file.read_text().strip():
            break
        await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await wait_gone(int(pid_file.read_text()))


def sleepers(marker: str) -> list[int]:
    """Pids of live ``sleep MARKER`` processes (the marker makes them this test's own)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv[:2] == [b"sleep", marker.encode()] and not gone(int(entry.name)):
                found.append(int(entry.name))
    return found


@pytest.fixture
def busy_cpu():
    """Keep every core busy while the test runs, so the event loop and the child race."""
    burners = [
        subprocess.Popen([PY, "-c", "while True: pass"], stdin=subprocess.DEVNULL) for _ in range(os.cpu_count() or 2)
    ]
    try:
        yield
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="finds the sleepers through /proc")
async def test_cancelling_at_any_moment_of_the_start_kills_the_group_promptly(cm, busy_cpu):
    """A cancellation while asyncio is still connecting the child's pipes used to hang
    (asyncio waited for pipes a background grandchild held) and leave the grandchild
    alive. 50 runs, cancelled after 0 to 9 event-loop iterations or a short sleep, by
    the signal (the shell skill) or by cancelling the task (the runner), each bounded."""
    marker = f"1000.{os.getpid()}{secrets.randbelow(10**6)}"
    command = f"sleep {marker} & sleep {marker}"
    for attempt in range(50):
        signal = Signal()
        if attempt % 2:
            task = asyncio.ensure_future(cm.invoke("shell", {"command": command}, config=INTERACTIVE, signal=signal))
        else:
            task = asyncio.ensure_future(run(["/bin/sh", "-c", command], env=build_env(), signal=signal))
        if attempt % 10 == 9:
            await asyncio.sleep(0.002 * attempt)
        else:
            for _ in range(attempt % 10):
                await asyncio.sleep(0)
        if attempt % 4 < 2:
            signal.cancel("stop")
        else:
            task.cancel()
        done, _ = await asyncio.wait([task], timeout=20)
        assert done, f"attempt {attempt}: the cancelled call did not return"
        assert task.cancelled() or isinstance(task.exception(), Cancelled), task.exception()
    for _ in range(500):
        if not sleepers(marker):
            break
        await asyncio.sleep(0.02)
    assert sleepers(marker) == [], "background processes outlived the cancelled calls"


@pytest.mark.parametrize(
    "command",
    [
        "rm -rf /",
        "rm -rf //",
        "rm -rf /.",
        "rm -rf /usr/..",
        "rm -fr /*",
        "rm -rf ~",
        "rm -r -f $HOME",
        "rm --no-preserve-root -rf /",
        "sudo rm -rf build",
        "ls && sudo -s",
        "/usr/bin/sudo id",
        "env X=1 nohup reboot",
        "shutdown -h now",
        "echo $(poweroff)",
        "mkfs.ext4 /dev/sda1",
        "dd if=/dev/zero of=/dev/sda",
        "chmod 777 secret",
        "chmod -R 777 .",
        ":(){ :|:& };:",
        "cat image > /dev/sda",
        "systemctl reboot",
    ],
)
async def test_dangerous_commands_are_refused(cm, command):  # S6.5
    with pytest.raises(PermissionDenied, match="command refused") as info:
        await cm.invoke("shell", {"command": command}, config=INTERACTIVE)
    assert info.value.rule == "shell blocklist (defence in depth)"


@pytest.mark.parametrize(
    "command", ["rm -rf build/", "echo sudo", "grep reboot log.txt || true", "chmod 644 f || true"]
)
async def test_ordinary_commands_are_not_refused(cm, command):
    with approval.session(lambda request: True):  # rm of a local folder is an admin call: asked, approved
        result = await cm.invoke("shell", {"command": command}, config=INTERACTIVE)
    assert "exit_code" in result


#: docs/security.md, "Subprocesses": what a child gets from the host. A literal on purpose:
#: the test holds the code to the docs, so widening the allow-list fails it.
DOCUMENTED_ENV = {"PATH", "HOME", "USER", "LANG", "LC_ALL", "TERM", "SHELL", "TMPDIR", "TZ"}
#: Variables a host may well have that no child gets.
UNLISTED_ENV = {
    "OPENAI_API_KEY": "sk-leak-me", "AWS_SECRET_ACCESS_KEY": "leak", "AWS_PROFILE": "prod", "GITHUB_TOKEN": "ghp-leak",
    "AGENT_APPS_MCP_TOKEN": "leak", "SSH_AUTH_SOCK": "/tmp/agent.sock", "LD_PRELOAD": "/tmp/evil.so",
    "PYTHONPATH": "/tmp/evil", "PYTHONSTARTUP": "/tmp/evil.py", "BASH_ENV": "/tmp/evil.sh", "LC_CTYPE": "C.UTF-8",
    "DISPLAY": ":0", "XDG_RUNTIME_DIR": "/run/user/1", "LOGNAME": "someone", "EDITOR": "vi",
}
#: What bash itself sets in the child, whatever the host has.
SHELL_ADDS = {"PWD", "SHLVL", "_", "OLDPWD"}


def host_env(monkeypatch, tmp_path) -> dict[str, str]:
    """Set every documented variable to a known value, and the unlisted ones."""
    values = {name: f"value-of-{name}" for name in DOCUMENTED_ENV - {"PATH", "HOME", "TMPDIR", "SHELL"}}
    values.update({"HOME": str(tmp_path), "TMPDIR": str(tmp_path), "SHELL": "/bin/sh", "LANG": "C.UTF-8",
                   "LC_ALL": "C.UTF-8", "TZ": "UTC", "PATH": os.environ["PATH"]})
    for name, value in {**values, **UNLISTED_ENV}.items():
        monkeypatch.setenv(name, value)
    return values


async def test_subprocess_environment_is_the_documented_allow_list_only(cm, monkeypatch, tmp_path):  # S6.6
    documented = host_env(monkeypatch, tmp_path)
    result = await cm.invoke(
        "shell", {"command": f"{PY} -c 'import json,os; print(json.dumps(dict(os.environ)))'"}, config=INTERACTIVE
    )
    env = json.loads(result["stdout"])
    assert "leak" not in result["stdout"]
    assert {k: v for k, v in env.items() if k not in SHELL_ADDS} == documented  # every one of them, and no more


async def test_security_env_adds_exactly_the_names_it_lists(cm, monkeypatch, tmp_path):
    documented = host_env(monkeypatch, tmp_path)
    monkeypatch.setenv("BUILD_FLAVOUR", "release")
    config = security(env=["BUILD_FLAVOUR", "NOT_SET_ANYWHERE"])
    command = f"{PY} -c 'import json,os; print(json.dumps(dict(os.environ)))'"
    env = json.loads((await cm.invoke("shell", {"command": command}, config=config))["stdout"])
    assert {k: v for k, v in env.items() if k not in SHELL_ADDS} == {**documented, "BUILD_FLAVOUR": "release"}


async def test_env_names_from_config_are_passed_by_name(cm, monkeypatch):
    monkeypatch.setenv("BUILD_FLAVOUR", "release")
    monkeypatch.setenv("OTHER_SECRET", "nope")
    result = await cm.invoke(
        "shell", {"command": "echo $BUILD_FLAVOUR-$OTHER_SECRET"}, config=security(env=["BUILD_FLAVOUR"])
    )
    assert result["stdout"] == "release-\n"


def test_build_env_forms():  # S6.13 (the helper; the tools.yaml form is in test_cli_tools)
    host = {"PATH": "/bin", "SECRET": "s", "TOKEN": "t", "HOME": "/h"}
    assert build_env(host=host) == {"PATH": "/bin", "HOME": "/h"}
    assert build_env(["TOKEN", "MISSING"], host=host) == {"PATH": "/bin", "HOME": "/h", "TOKEN": "t"}
    assert build_env(
        {"DEPLOY_TOKEN": "${TOKEN}", "GONE": "${MISSING}", "FIXED": "1", "HALF": "${TOKEN}:${MISSING}"}, host=host
    ) == {
        "PATH": "/bin",
        "HOME": "/h",
        "DEPLOY_TOKEN": "t",
        "FIXED": "1",
        "HALF": "t:",  # left out only when every reference is missing
    }


async def test_shell_cwd_is_path_checked(cm, workspace, outside):
    (workspace / "sub").mkdir()
    result = await cm.invoke("shell", {"command": "pwd", "cwd": "sub"}, config=INTERACTIVE)
    assert result["stdout"].strip() == str(workspace / "sub")
    with pytest.raises(PermissionDenied, match="outside the allowed paths"):
        await cm.invoke("shell", {"command": "pwd", "cwd": str(outside)}, config=INTERACTIVE)


async def test_output_from_both_streams_shares_the_cap():
    result = await run(
        [PY, "-c", "import sys; sys.stdout.write('o' * 1000); sys.stdout.flush(); sys.stderr.write('e' * 1000)"],
        env=build_env(),
        output_limit=1500,
    )
    assert result.truncated and result.total_bytes == 2000
    assert len(result.stdout.split("\n[")[0]) + len(result.stderr.split("\n[")[0]) == 1500


async def test_missing_program_is_a_clear_error():
    with pytest.raises(FileNotFoundError):
        await run(["/nonexistent/program"], env=build_env())


def test_gone_helper():
    assert gone(2**22 + 12345) and not gone(os.getpid())
