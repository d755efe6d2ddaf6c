"""Shell completion: a real bash completes through the script ``completion bash`` prints;
zsh and fish get theirs; the start of any other command is not slowed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BIN = str(Path(sys.executable).parent)  # agent-apps, installed beside this Python


def completions(line: str, cwd: Path, env: dict[str, str] | None = None) -> list[str]:
    """What the shell would be offered for ``line`` (the protocol bash's script speaks)."""
    out = cwd / "completions.txt"
    env = {**os.environ, **(env or {}), "_ARGCOMPLETE": "1", "COMP_LINE": line, "COMP_POINT": str(len(line)),
           "_ARGCOMPLETE_STDOUT_FILENAME": str(out)}
    subprocess.run([sys.executable, "-m", "agent_apps"], cwd=cwd, env=env, check=True, timeout=120)
    return sorted(word.strip() for word in out.read_text().split("\x0b"))


def test_commands_options_skill_names_and_run_ids(tmp_path, skills_path, write_skill):
    write_skill("word-count", "frontmatter = {}\nasync def main(ctx, args):\n    return 1\n")
    assert completions("agent-apps in", tmp_path) == ["invoke"]
    assert completions("agent-apps runs p", tmp_path) == ["prune"]
    assert completions(f"agent-apps invoke --path {skills_path} word-", tmp_path) == ["word-count"]
    assert completions("agent-apps describe file-r", tmp_path) == ["file-read"]
    assert completions("agent-apps completion ", tmp_path)[-3:] == ["bash", "fish", "zsh"]
    assert "--older-than" in completions("agent-apps sessions prune --", tmp_path)
    assert {"--host", "--port"} <= set(completions("agent-apps console --", tmp_path))


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_a_real_bash_completes_through_the_printed_script(tmp_path):
    script = (
        'eval "$(agent-apps completion bash)"\n'
        "COMP_LINE='agent-apps desc'; COMP_POINT=${#COMP_LINE}; COMP_WORDS=(agent-apps desc); COMP_CWORD=1\n"
        "_python_argcomplete agent-apps desc agent-apps\n"
        'echo "${COMPREPLY[*]}"\n'
    )
    env = {**os.environ, "PATH": BIN + os.pathsep + os.environ["PATH"]}
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["describe"], done.stderr


@pytest.mark.parametrize(
    ("shell", "words"), [("zsh", "#compdef agent-apps"), ("fish", "complete --command agent-apps")]
)
def test_zsh_and_fish_scripts(tmp_path, shell, words):
    done = subprocess.run([sys.executable, "-m", "agent_apps", "completion", shell], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and words in done.stdout
