"""``invoke --model/--config/--args @-``, ``run PROMPT`` and ``chat``: real processes, the
scripted model."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from agent_apps.cli import main

#: The scripted model, from the command line: each run counts in the session's memory.
COUNT = "memory['n'] = memory.get('n', 0) + 1\nctx.manager.finish(f\"turn {memory['n']}\")"
COUNTING = ["--config", "model.agent=agent-scripted", "--config", "model.script:=" + json.dumps([{"code": COUNT}])]


def agent_apps(*argv, input=None, cwd):
    return subprocess.run(
        [sys.executable, "-m", "agent_apps", *argv], input=input, cwd=cwd, capture_output=True, text=True,
        timeout=180,
    )


def test_config_and_model_are_the_call_layer(write_skill, skills_path, capsys):
    write_skill("model", 'frontmatter = {"metadata": {"model": {"model_id": "m1", "max_turns": 3}}}\n'
                "async def main(ctx, args):\n    m = ctx.manager.config()['model']\n"
                "    return [m['model_id'], m['max_turns'], m.get('temperature')]\n")
    argv = ["invoke", "model", "--path", str(skills_path)]
    assert main(argv) == 0 and json.loads(capsys.readouterr().out) == ["m1", 3, None]
    assert main([*argv, "--model", "m2", "--config", "model.max_turns=5", "--config", "model.temperature:=0.5"]) == 0
    assert json.loads(capsys.readouterr().out) == ["m2", 5, 0.5]  # above the skill's own metadata


@pytest.mark.parametrize(
    ("pair", "words"),
    [
        ("model.max_turn=5", "--config model.max_turn=5: unknown config key 'model.max_turn' (did you mean "),
        ("model.max_turns=many", "--config model.max_turns=many: model.max_turns must be an integer"),
        ("model.max_turns", "--config 'model.max_turns' is not KEY=VALUE or KEY:=JSON"),
        ("model.params:={bad", "--config model.params:={bad: not valid JSON"),
    ],
)
def test_a_bad_config_pair_is_named_and_exits_2(write_skill, skills_path, capsys, pair, words):
    write_skill("echo", "frontmatter = {}\nasync def main(ctx, args):\n    return 1\n")
    assert main(["invoke", "echo", "--path", str(skills_path), "--config", pair]) == 2
    assert capsys.readouterr().err.startswith(f"error: {words}")


def test_args_from_stdin(write_skill, skills_path, tmp_path):
    write_skill("echo", 'frontmatter = {"params": {"type": "object"}}\nasync def main(ctx, args):\n    return args\n')
    done = agent_apps("invoke", "echo", "--path", skills_path, "--args", "@-", input='{"a": [1, 2]}', cwd=tmp_path)
    assert done.returncode == 0 and json.loads(done.stdout) == {"a": [1, 2]}
    bad = agent_apps("invoke", "echo", "--path", skills_path, "--args", "@-", input="[1]", cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr == "error: --args must be a JSON object, not list\n"
    bad = agent_apps("invoke", "echo", "--path", skills_path, "--args", "@-", input="{", cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.startswith("error: --args (stdin) is not valid JSON")


def test_run_a_prompt_without_a_skill_file(tmp_path):
    script = '[{"code": "ctx.manager.finish(await ctx.manager.invoke(\'skill-list\', {}) is not None)"}]'
    done = agent_apps("run", "list the skills", "--tools", "skill-list,file-*", "--config",
                      "model.agent=agent-scripted", "--config", f"model.script:={script}", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "true\n"
    assert "▶ run (agent-scripted; tools: file-edit, file-list, file-read, file-write, skill-list)" in done.stderr
    quiet = agent_apps("run", "-", "-q", "--tools", "", *COUNTING, input="count", cwd=tmp_path)
    assert quiet.returncode == 0 and quiet.stdout == "turn 1\n" and quiet.stderr == ""
    empty = agent_apps("run", "-", input=" ", cwd=tmp_path)
    assert empty.returncode == 2 and empty.stderr.startswith("error: the prompt is empty")


def test_chat_turns_in_one_session_driven_through_stdin(tmp_path):
    env = {**os.environ, "AGENT_APPS_STATE": str(tmp_path / "state.db")}
    chat = subprocess.run(
        [sys.executable, "-m", "agent_apps", "chat", "--session", "c1", "--tools", "", *COUNTING],
        input="hello\n\nagain\n/exit\nnot read\n", cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180,
    )
    assert chat.returncode == 0, chat.stderr
    assert chat.stdout == "turn 1\nturn 2\n"  # the second turn sees the session the first left
    assert chat.stderr.startswith("agent-apps chat: session c1; end it with Ctrl-D or /exit")
    assert chat.stderr.count("▶ chat (agent-scripted; tools: none)") == 2  # the live view, each turn
    again = subprocess.run(
        [sys.executable, "-m", "agent_apps", "chat", "--session", "c1", "-q", *COUNTING],
        input="more\n", cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180,
    )
    assert again.returncode == 0 and again.stdout == "turn 3\n"  # taken up later; ends at the end of stdin
    shown = subprocess.run([sys.executable, "-m", "agent_apps", "sessions", "show", "c1"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=60)
    assert "#1 user: hello" in shown.stdout and "user: more" in shown.stdout


def test_chat_and_run_off_the_record_see_the_session_and_leave_it_as_it_was(tmp_path):
    env = {**os.environ, "AGENT_APPS_STATE": str(tmp_path / "state.db")}

    def cli(*argv, input):
        return subprocess.run([sys.executable, "-m", "agent_apps", *argv, "-q", "--tools", "", *COUNTING], input=input,
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)

    assert cli("chat", "--session", "c1", input="hello\n").stdout == "turn 1\n"
    off = cli("chat", "--session", "c1", "--read-only", input="peek\npeek again\n")
    assert off.returncode == 0 and off.stdout == "turn 2\nturn 2\n"  # each turn sees the session, none is kept
    assert cli("run", "-", "--session", "c1", "--read-only", input="peek").stdout == "turn 2\n"
    assert cli("chat", "--session", "c1", input="on\n").stdout == "turn 2\n"
    refused = cli("chat", "--read-only", input="x\n")
    assert refused.returncode == 2
    assert refused.stderr == "error: --read-only applies to a session: give --session ID too\n"
    refused = cli("run", "-", "--session", "c9", "--read-only", input="x")
    assert refused.returncode == 2 and "--session c9: no such session, and a read-only run makes none" in refused.stderr


SLOW = '[{"code": "import asyncio\\nawait asyncio.sleep(60)"}, {"text": "late"}]'


def test_ctrl_c_in_a_chat_cancels_the_turn_and_the_chat_goes_on(tmp_path):
    env = {**os.environ, "AGENT_APPS_STATE": str(tmp_path / "state.db"), "PYTHONUNBUFFERED": "1"}
    argv = ["chat", "--tools", "", "--config", "model.agent=agent-scripted", "--config", f"model.script:={SLOW}"]
    proc = subprocess.Popen([sys.executable, "-m", "agent_apps", *argv], cwd=tmp_path, env=env, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        proc.stdin.write("wait\n")
        proc.stdin.flush()
        for line in proc.stderr:  # the turn is under way: its code runs
            if "│ await asyncio.sleep(60)" in line:
                break
        proc.send_signal(signal.SIGINT)
        for line in proc.stderr:
            if line.startswith("interrupted: the turn was cancelled; the chat goes on"):
                break
        out, err = proc.communicate("/exit\n", timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0, err  # the turn was cancelled; the chat went on and ended at /exit
    assert "late" not in out
