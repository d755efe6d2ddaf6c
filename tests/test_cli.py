"""The agent-apps command: output, exit codes, error style, lazy imports, Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from agent_apps.cli import main
from agent_apps.testing import default_sigint

COUNT = """
frontmatter = {
    "description": "Count the words in a text.\\nSecond line.",
    "params": {"type": "object", "properties": {"text": {"type": "string"}, "n": {"type": "integer", "default": 1},
               "flag": {"type": "boolean"}, "tags": {"type": "array"}}, "required": ["text"]},
    "metadata": {"returns": {"type": "object"}},
}
async def main(ctx, args):
    return {"words": len(args["text"].split()), "n": args["n"], "flag": args.get("flag"), "tags": args.get("tags")}
"""


@pytest.fixture
def cli(skills_path, write_skill, capsys):
    write_skill("count", COUNT)
    write_skill(
        "shout",
        'frontmatter = {"params": {"type": "object", "properties": {"s": {"type": "string"}}}}\n'
        'async def main(ctx, args):\n    return args["s"].upper()\n',
    )
    write_skill("crash", "frontmatter = {}\nasync def main(ctx, args):\n    raise RuntimeError('disk on fire')\n")
    write_skill(
        "secret", 'frontmatter = {"metadata": {"visibility": "hidden"}}\nasync def main(ctx, args):\n    return 1\n'
    )

    def run(*argv):
        code = main([*argv, "--path", str(skills_path)])
        out, err = capsys.readouterr()
        return code, out, err

    return run


def test_invoke_coerces_key_value_by_schema(cli):
    code, out, err = cli("invoke", "count", "text=a b c", "n=3", "flag=true", 'tags:=["x"]')
    assert code == 0 and err == ""
    assert json.loads(out) == {"words": 3, "n": 3, "flag": True, "tags": ["x"]}


def test_invoke_prints_strings_as_is_and_json_on_request(cli, tmp_path):
    assert cli("invoke", "shout", "s=hi")[1] == "HI\n"
    assert cli("invoke", "shout", "s=hi", "--json")[1] == '"HI"\n'
    args = tmp_path / "args.json"
    args.write_text('{"s": "file"}')
    assert cli("invoke", "shout", "--args", f"@{args}")[1] == "FILE\n"
    assert cli("invoke", "shout", "--args", '{"s": "inline"}')[1] == "INLINE\n"


@pytest.mark.parametrize(
    ("argv", "code", "words"),
    [
        (["invoke", "nope"], 2, "error: no skill named 'nope'"),
        (["invoke", "count"], 2, "error: count: invalid args: 'text' is a required property"),
        (
            ["invoke", "count", "text=x", "n=many"],
            2,
            "error: count: invalid args at n: 'many' is not of type 'integer'",
        ),
        (["invoke", "count", "text"], 2, "not KEY=VALUE"),
        (["invoke", "count", "tags:=[oops"], 2, "tags:= value is not valid JSON"),
        (["invoke", "count", "--args", "[1]"], 2, "--args must be a JSON object"),
        (["invoke", "crash"], 1, "error: crash failed: RuntimeError: disk on fire"),
    ],
)
def test_errors_are_one_or_two_plain_lines_with_the_right_exit_code(cli, argv, code, words):
    got, out, err = cli(*argv)
    assert got == code, err
    assert words in err
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 2
    assert out == ""


def test_debug_shows_the_traceback(cli):
    code, out, err = cli("invoke", "crash", "--debug")
    assert code == 1 and "Traceback" in err and "disk on fire" in err


def test_list_hides_hidden_and_shows_first_lines(cli):
    code, out, err = cli("list")
    assert code == 0
    lines = out.splitlines()
    assert any(line.startswith("count") and line.endswith("Count the words in a text.") for line in lines)
    assert not any(line.startswith("secret") for line in lines)


def test_list_a_pattern_names_only_or_with_files(cli, skills_path):
    code, out, _ = cli("list", "c*")
    assert code == 0 and [line.split()[0] for line in out.splitlines()] == ["count", "crash"]
    code, out, _ = cli("list", "words in a text", "-q")
    assert out == "count\n"  # without glob characters: words of the name or the description
    code, out, _ = cli("list", "shout", "-v")
    assert out.split() == ["shout", "path", str(skills_path / "shout.skill.py") + ":1"]
    code, out, err = cli("list", "nothing-like-this")
    assert code == 0 and out == "" and "no skill matches 'nothing-like-this'" in err


def test_list_all_shows_origins_and_shadowing(cli, write_skill, skills_path):
    write_skill("skill-list", "frontmatter = {}\nasync def main(ctx, args):\n    return []\n")
    code, out, err = cli("list", "--all")
    rows = [line.split() for line in out.splitlines()]
    assert ["secret", "path"] == rows[[r[0] for r in rows].index("secret")][:2]
    shadowed = [r for r in rows if r[0] == "skill-list" and r[1] == "bundled"]
    assert shadowed and "shadowed" in shadowed[0]
    data = json.loads(cli("list", "--all", "--json")[1])
    assert {s["origin"] for s in data["skills"] if s["name"] == "skill-list"} == {"path", "bundled"}


def test_list_reports_broken_files_on_stderr_still_lists_and_exits_1(cli, write_skill, skills_path):
    path = write_skill("broken", "frontmatter = {\ndef main(ctx, args): ...\n")
    code, out, err = cli("list")
    assert code == 1 and "count" in out
    assert "\n1 file could not be loaded:\n" in err
    assert f"{path}:" in err and "syntax error" in err
    code, out, err = cli("list", "--json")
    assert code == 1 and len(json.loads(out)["errors"]) == 1


def test_list_reports_a_broken_config(cli, tmp_path, monkeypatch):
    (tmp_path / "agent-apps.yaml").write_text("modle: {}\n")
    monkeypatch.chdir(tmp_path)
    code, out, err = cli("list")
    assert code == 1 and "count" in out
    assert "agent-apps.yaml:1: unknown config key 'modle' (did you mean 'model'?)" in err


def test_invoking_a_file_that_failed_to_load_says_why(cli, write_skill):
    path = write_skill("Bad_Name", "frontmatter = {}\nasync def main(ctx, args):\n    return 1\n")
    code, out, err = cli("invoke", "Bad_Name")
    assert code == 1
    assert err == f"error: {path}:1: invalid skill name 'Bad_Name': names use only a-z, 0-9 and '-'\n"


def test_version_and_usage_errors_in_one_style(capsys):
    from agent_apps import __version__

    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0 and capsys.readouterr().out == f"agent-apps {__version__}\n"
    with pytest.raises(SystemExit) as info:
        main(["invoke"])
    err = capsys.readouterr().err
    assert info.value.code == 2
    assert err.splitlines()[-1] == "error: the following arguments are required: NAME"  # not KEY=VALUE
    with pytest.raises(SystemExit):
        main(["bogus"])
    assert capsys.readouterr().err.splitlines()[-1].startswith("error: argument COMMAND: invalid choice: 'bogus'")


def test_describe(cli):
    code, out, err = cli("describe", "count")
    assert code == 0
    assert out.splitlines()[0] == "count: Count the words in a text."
    assert "text (string, required)" in out and "n (integer, default 1)" in out
    assert json.loads(cli("describe", "count", "--json")[1])["params"]["required"] == ["text"]
    assert cli("describe", "nope")[0] == 2


def test_config_shows_values_and_sources(cli):
    code, out, err = cli("config", "count")
    assert code == 0
    assert any(line.split()[:3] == ["model.agent", '"agent-strands"', "defaults"] for line in out.splitlines())
    data = json.loads(cli("config", "count", "--json")[1])
    assert data["sources"]["model.max_turns"] == "defaults"


def test_config_shows_a_long_value_as_one_short_row(cli, write_skill):
    returns = {"type": "object", "properties": {f"field_{i}": {"type": "string"} for i in range(40)}}
    write_skill("wide", f'frontmatter = {{"metadata": {{"returns": {returns!r}}}}}\nasync def main(ctx, args): ...\n')
    code, out, err = cli("config", "wide")
    rows = {line.split()[0]: line for line in out.splitlines()}
    assert code == 0 and "returns" in rows and not any(key.startswith("returns.") for key in rows)
    assert max(len(line) for line in out.splitlines()) < 300
    assert '{"type": "object", "properties": {"field_0": {"type": "stri…' in rows["returns"]


def test_no_command_prints_help_and_exits_2(capsys):
    assert main([]) == 2
    assert "invoke" in capsys.readouterr().err


# -- real processes ------------------------------------------------------------------


def _run(*argv, cwd, **kw):
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([sys.executable, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=60, **kw)


HEAVY = (
    "boto3", "botocore", "strands", "mcp", "wasmtime", "jsonschema", "ray", "psycopg", "psycopg_pool", "argcomplete",
    "starlette", "uvicorn", "agent_apps.console",
)  # fmt: skip


def test_import_and_list_do_not_import_heavy_modules(tmp_path, skills_path, write_skill):
    write_skill("count", COUNT)
    code = (
        "import sys, agent_apps\n"
        "from agent_apps.cli import main\n"
        f"main(['list', '--path', {str(skills_path)!r}])\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    result = _run("-c", code, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]"


#: What the command line's start leaves out (docs/cli.md, "Start-up time"), beyond HEAVY.
SLOW_TO_IMPORT = ("asyncio", "jsonschema", "importlib.metadata", "tomllib", "yaml")


def _imported_by(code, cwd):
    result = _run("-c", f"import sys\n{code}\nimport json\nprint(json.dumps(sorted(sys.modules)))", cwd=cwd)
    assert result.returncode == 0, result.stderr
    return set(json.loads(result.stdout.strip().splitlines()[-1]))


def test_import_agent_apps_loads_nothing_of_the_kernel(tmp_path):
    modules = _imported_by("import agent_apps\nassert 'ContextManager' in dir(agent_apps)", tmp_path)
    assert not modules & {*HEAVY, *SLOW_TO_IMPORT, "pluggy", "agent_apps.manager", "agent_apps.config"}


def test_every_public_name_resolves():
    import agent_apps
    import agent_apps.mcp
    import agent_apps.sandbox
    import agent_apps.testing
    import agent_apps.tools

    for package in (agent_apps, agent_apps.mcp, agent_apps.sandbox, agent_apps.testing, agent_apps.tools):
        for name in package.__all__:
            assert getattr(package, name) is not None, name
        assert set(package.__all__) <= set(dir(package)), package.__name__
        with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
            package.no_such_name  # noqa: B018


def test_list_imports_no_event_loop_no_validator_no_entry_points(tmp_path, skills_path, write_skill):
    write_skill("count", COUNT)
    modules = _imported_by(f"from agent_apps.cli import main\nmain(['list', '--path', {str(skills_path)!r}])", tmp_path)
    assert not modules & {*HEAVY, "asyncio", "jsonschema", "importlib.metadata", "tomllib"}
    assert "agent_apps.pipeline" not in modules


def test_invoking_a_skill_with_a_simple_schema_does_not_import_jsonschema(tmp_path, skills_path, write_skill):
    write_skill("count", COUNT)
    invoke = f"main(['invoke', 'count', 'text=a b', '--path', {str(skills_path)!r}])"
    modules = _imported_by(f"from agent_apps.cli import main\n{invoke}", tmp_path)
    assert "asyncio" in modules  # something ran
    assert not modules & {*HEAVY, "importlib.metadata", "tomllib"}
    assert "agent_apps.run_record" not in modules  # a plain invocation makes no run record
    bad = _run("-m", "agent_apps", "invoke", "count", "text:=42", "--path", str(skills_path), cwd=tmp_path)
    assert bad.returncode == 2 and "42 is not of type 'string'" in bad.stderr  # jsonschema's word, when it fails


def test_a_command_line_builds_the_parser_of_its_command_only(capsys):
    from agent_apps.cli import _COMMANDS, _GROUPS, _parser

    assert set(_parser("list")[1]) == {"list"}
    intermixed = {"invoke", "run", "list", "describe", "config", "resume"}
    assert set(_parser(None)[1]) == set(_parser("bogus")[1]) == intermixed
    with pytest.raises(SystemExit):
        main(["--help"])
    listed = capsys.readouterr().out
    commands = [line.split()[0] for line in listed.splitlines() if line.startswith("    ") and line[4] != " "]
    assert commands == [*_COMMANDS, *_GROUPS]
    with pytest.raises(SystemExit):
        main(["list", "--help"])
    assert "usage: agent-apps list [-h] [--path DIR]" in capsys.readouterr().out


GC_STATE = """
frontmatter = {}
async def main(ctx, args):
    import gc
    return [gc.isenabled(), gc.get_freeze_count() > 0]
"""


def test_the_garbage_collector_pauses_for_the_start_only(tmp_path, skills_path, write_skill):
    import gc

    write_skill("gc-state", GC_STATE)
    result = _run("-m", "agent_apps", "invoke", "gc-state", "--path", str(skills_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [True, True]  # the skill runs collected; the start's objects frozen
    assert main(["invoke", "gc-state", "--path", str(skills_path)]) == 0  # in a caller's process:
    assert gc.isenabled() and gc.get_freeze_count() == 0  # its collector is left alone


def test_exit_codes_from_a_real_process(tmp_path, skills_path, write_skill):
    write_skill("count", COUNT)
    ok = _run("-m", "agent_apps", "invoke", "count", "text=a b", "--path", str(skills_path), cwd=tmp_path)
    assert ok.returncode == 0 and json.loads(ok.stdout)["words"] == 2
    bad = _run("-m", "agent_apps", "invoke", "count", "--path", str(skills_path), cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.startswith("error: count: invalid args")


def test_ctrl_c_cancels_cleanly(tmp_path, skills_path, write_skill):
    marker = tmp_path / "cancelled"
    write_skill(
        "sleepy",
        f"""
        import asyncio, pathlib
        frontmatter = {{}}
        async def main(ctx, args):
            ctx.signal.add_callback(lambda reason: pathlib.Path({str(marker)!r}).write_text(reason))
            print("started", flush=True)
            await asyncio.sleep(60)
        """,
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_apps", "invoke", "sleepy", "--path", str(skills_path)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )
    assert proc.stdout.readline().strip() == "started"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert "interrupted" in err and "Traceback" not in err
    for _ in range(100):
        if marker.exists():
            break
        time.sleep(0.01)
    assert marker.read_text() == "cancelled"


@pytest.mark.parametrize(
    "argv", [["describe", "big", "--json"], ["describe", "big"], ["config", "big", "--json"], ["list", "--json"]]
)
def test_output_cut_short_by_the_reader_ends_quietly(tmp_path, skills_path, write_skill, argv):
    body = "\n".join(f"line {i} of a long prompt, and a long config value" for i in range(6000))  # < 1 MB
    write_skill("big.skill.md", f"---\ndescription: big\nmetadata:\n  notes: {json.dumps(body)}\n---\n{body}\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_apps", *argv, "--path", str(skills_path)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout.readline()  # the reader takes one line (like `| head -1`), then goes away
    proc.stdout.close()
    err = proc.communicate(timeout=60)[1].decode()
    assert proc.returncode == 141 and err == ""


def test_unknown_ref_scheme_and_missing_path_are_explained(cli, capsys):
    code, out, err = cli("invoke", "weird://x")
    assert code == 2 and "unknown ref scheme 'weird://'" in err
    assert main(["list", "--path", "/nonexistent/dir"]) == 0
    assert "warning: --path /nonexistent/dir: no such directory" in capsys.readouterr().err


def test_a_missing_skill_file_is_named_as_a_file(cli, tmp_path):
    """Before: ``no skill named 'file:///…/nope.skill.py (no such file)'``."""
    for command in ("invoke", "describe", "config"):
        code, out, err = cli(command, str(tmp_path / "nope.skill.py"))
        assert code == 2 and err == f"error: no skill file {tmp_path / 'nope.skill.py'}: No such file or directory\n"


def test_describe_and_config_take_a_path_as_invoke_does(cli, skills_path):
    code, out, err = cli("describe", str(skills_path / "count.skill.py"))
    assert code == 0 and out.startswith("count: Count the words in a text."), err
    code, out, err = cli("config", str(skills_path / "shout.skill.py"))
    assert code == 0 and "model.max_turns" in out, err


def test_config_and_list_show_paths_as_typed(cli, write_skill, skills_path, tmp_path, monkeypatch):
    """Before: each source line held the skill's absolute path (lines of 170-190 characters)."""
    meta = 'frontmatter = {"metadata": {"model": {"region": "eu-west-1"}}}\nasync def main(ctx, args): ...\n'
    write_skill("meta", meta)
    monkeypatch.chdir(skills_path.parent)
    code, out, _ = cli("config", "meta")
    (row,) = [line for line in out.splitlines() if line.startswith("model.region")]
    assert row.endswith("meta metadata (skills/meta.skill.py:1)")
    monkeypatch.setenv("HOME", str(tmp_path.parent))
    monkeypatch.chdir("/")
    code, out, _ = cli("config", "meta")
    (row,) = [line for line in out.splitlines() if line.startswith("model.region")]
    assert row.endswith(f"meta metadata (~/{tmp_path.name}/skills/meta.skill.py:1)")
    code, out, _ = cli("config", "meta", "--json")
    assert json.loads(out)["sources"]["model.region"] == f"meta metadata ({skills_path / 'meta.skill.py'}:1)"
    code, out, _ = cli("list", "--all")
    assert f"~/{tmp_path.name}/skills/count.skill.py:" in out


@pytest.mark.parametrize(
    ("address", "words"),
    [("127.0.0.1:99999", "a port from 0 to 65535"), ("0.0.0.0:8123", "without authentication")],
)
def test_mcp_http_refuses_bad_or_open_addresses(capsys, monkeypatch, address, words):
    pytest.importorskip("mcp")
    monkeypatch.delenv("AGENT_APPS_MCP_TOKEN", raising=False)
    assert main(["mcp", "--http", address]) == 2
    assert words in capsys.readouterr().err


def test_progress_counts_in_words_estimates_marked_and_each_error_once():
    import io

    from agent_apps.progress import ProgressPrinter

    out = io.StringIO()
    show = ProgressPrinter(out)
    top, sub = {"agent": "top", "context_id": "a"}, {"agent": "sub", "context_id": "b", "ancestor_context_id": "a"}
    events = [
        {"type": "agent-start", **top},
        {"type": "agent-error", "error": {"message": "slow down"}, "attempt": 1, **top},
        {"type": "agent-error", "retrying": True, "attempt": 1, "delay": 0.5, **top},
        {"type": "agent-start", **sub},
        {"type": "agent-error", "error": {"message": "bad request"}, "attempt": 1, **sub},
        {"type": "agent-error", "error": {"message": "sub failed: bad request"}, **sub},
        {"type": "agent-complete", "turns": 1, "steps": 1, "usage": {"input_tokens": 9, "output_tokens": 2}, **top},
        {"type": "agent-error", "error": {"message": "top failed"}, **top},
        {"type": "agent-complete", "turns": 2, "steps": 0, "usage": {"input_tokens": 9, "estimated": True}, **top},
    ]
    for event in events:
        show("t", event)
    lines = [line.strip() for line in out.getvalue().splitlines()]
    assert lines[1] == "↻ slow down: retry 1 in 0.5 s"
    assert [line for line in lines if "bad request" in line] == ["✗ sub: sub failed: bad request"]  # once
    assert not any("top failed" in line for line in lines)  # the command line prints the outermost error
    assert lines[-2] == "✓ top (1 turn, 1 step, 9 in / 2 out tokens)"
    assert lines[-1] == "✓ top (2 turns, 0 steps, ~9 in / ~0 out tokens (estimated))"

