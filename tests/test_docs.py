"""Every example in README.md and docs/*.md runs as written.

Each fenced block is checked by its language, in order, in a fresh working directory
per document (``examples/`` is reachable there, so are the files earlier blocks wrote).
An HTML comment just above a block changes what is done with it (see docs/testing.md,
"The docs test themselves"):

* ``console``: each ``$ agent-apps ...`` line runs in a real process (as the reader
  types it, in a checkout), and its output (stdout and stderr together) must match the lines
  shown below it; a ``...`` stands for any text (a whole line of it: any lines).
  ``$ cd DIR`` and ``$ echo $?`` work as in a shell.
* ``python``: runs as a script (top-level ``await`` allowed). A block whose first line
  is ``# path/to/NAME.skill.py`` is a skill file: it must load and that file must exist.
* ``yaml`` / ``toml``: a config (``agent-apps.yaml``, ``[tool.agent-apps]``), checked like
  any config file (unknown keys are errors); a ``metadata:`` block is a skill's
  frontmatter, a ``tools:`` block a tools.yaml. ``json`` must parse. ``markdown`` is a
  prompt skill and must load.
* ``<!-- doc-test: file PATH -->``: write the block to PATH first (then check it as above).
* ``<!-- doc-test: in-skill -->``: a python block runs as the body of a skill's ``main``.
* ``<!-- doc-test: agent-code -->``: a python block runs as an agent's code, in the sandbox.
* ``<!-- doc-test: pytest -->``: a python block is a test module; pytest runs it.
* ``<!-- doc-test: skip REASON -->``: not run, for a reason the reader can see in the
  source (it needs AWS, a network, or serves forever).

``text``, ``sh`` and unlabelled blocks are prose (synopses, sample messages).
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from agent_apps import ContextManager
from agent_apps.loading import load_file
from agent_apps.mcp.client import MOUNTED_ENV
from agent_apps.tools.cli_tools import load_tools_file
from agent_apps.validation import check_schemas

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "examples").glob("*/README.md"))]
_FENCE = re.compile(r"^(?:<!-- doc-test: (?P<mode>.*?) -->\n)?```(?P<lang>\S*)\n(?P<body>.*?)^```\n", re.S | re.M)
# Lines that depend on the machine, not on the example: the sandbox's first build.
_NOISE = re.compile(r"^agent-apps: ( |building the sandbox component)")


@dataclass
class Block:
    doc: Path
    line: int
    lang: str
    mode: str
    body: str

    def __str__(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"


def blocks(doc: Path) -> list[Block]:
    text = doc.read_text(encoding="utf-8")
    found = []
    for match in _FENCE.finditer(text):
        line = text.count("\n", 0, match.start("lang")) + 1
        found.append(Block(doc, line, match["lang"], (match["mode"] or "").strip(), match["body"]))
    return found


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A fresh project directory with a copy of ``examples/`` (and ``tests/``, whose MCP
    helper server an example mounts), and a fresh agent-apps home."""
    work = tmp_path / "work"
    shutil.copytree(ROOT / "examples", work / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    (work / "tests").symlink_to(ROOT / "tests")
    monkeypatch.chdir(work)
    monkeypatch.setenv("AGENT_APPS_HOME", str(tmp_path / "home"))
    monkeypatch.delenv(MOUNTED_ENV, raising=False)
    return work


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: str(d.relative_to(ROOT)))
def test_every_example_runs_as_written(doc, workdir, monkeypatch):
    assert blocks(doc), f"{doc}: no code blocks found (is the fence syntax right?)"
    tests: list[Path] = []
    for block in blocks(doc):
        if block.mode.startswith("skip"):
            assert block.mode[4:].strip(), f"{block}: say why the example is skipped"
            continue
        try:
            check(block, workdir, monkeypatch, tests)
        except AssertionError:
            raise
        except Exception as exc:
            raise AssertionError(f"{block}: the example fails: {type(exc).__name__}: {exc}") from exc
    if tests:
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *map(str, tests)],
            cwd=workdir,
            capture_output=True,
            text=True,
            timeout=100,
        )
        assert run.returncode == 0, f"{doc.relative_to(ROOT)}: its pytest examples fail:\n{run.stdout}{run.stderr}"


def check(block: Block, work: Path, monkeypatch: pytest.MonkeyPatch, tests: list[Path]) -> None:
    mode, _, arg = block.mode.partition(" ")
    body = block.body
    if mode == "file":
        path = Path(os.getcwd()) / arg
        assert not path.resolve().is_relative_to(ROOT), f"{block}: writes into the repository ({arg})"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body, encoding="utf-8")
        check_file(block, path)
    elif mode == "pytest":
        tests.append(work / f"test_doc_{block.line}.py")
        tests[-1].write_text(body, encoding="utf-8")
    elif mode == "in-skill":
        run_in_skill(block, work)
    elif mode == "agent-code":
        run_agent_code(block, work)
    elif mode:
        raise AssertionError(f"{block}: unknown doc-test mode {block.mode!r}")
    elif block.lang == "console":
        run_console(block)
    elif block.lang == "python":
        first = body.splitlines()[0]
        if re.fullmatch(r"# \S+\.skill\.py", first):
            assert (ROOT / first[2:]).is_file(), f"{block}: {first[2:]} does not exist"
            path = work / "excerpts" / Path(first[2:]).name
            path.parent.mkdir(exist_ok=True)
            path.write_text(body, encoding="utf-8")
            check_file(block, path)
        else:
            run_python(body, str(block))
    elif block.lang in ("yaml", "toml"):
        check_config(block, work)
    elif block.lang == "json":
        json.loads(body)
    elif block.lang == "markdown":
        path = work / "prompts" / f"doc-{block.line}.skill.md"
        path.parent.mkdir(exist_ok=True)
        path.write_text(body, encoding="utf-8")
        check_file(block, path)


def check_file(block: Block, path: Path) -> None:
    """A written file must load: a skill file (schemas and main too), a tools.yaml, a config."""
    if path.name.endswith((".skill.py", ".skill.md")) or path.name == "SKILL.md":
        skill = load_file(path, origin="file")
        check_schemas(skill)
        if skill.kind == "code":
            assert callable(skill.main), f"{block}: no main"
        with servers_not_started():
            ContextManager([], cwd=path.parent, env=False, project=False, entry_points=False).config_for(skill)
    elif path.name == "tools.yaml":
        assert load_tools_file(path)[1] == [], f"{block}: the tools file has errors"
    elif path.name in ("agent-apps.yaml", "pyproject.toml", "config.yaml"):
        with servers_not_started():
            ContextManager([], cwd=path.parent, env=False, entry_points=False).config_for(None)


@contextlib.contextmanager
def servers_not_started():
    """Check a config without starting its MCP servers (an example names servers this
    machine does not have)."""
    os.environ[MOUNTED_ENV] = "1"
    try:
        yield
    finally:
        del os.environ[MOUNTED_ENV]


def check_config(block: Block, work: Path) -> None:
    """A config example must be valid config: written where it would live, then read."""
    where = work / "configs" / f"doc-{block.line}"
    where.mkdir(parents=True)
    if block.lang == "toml":
        data = tomllib.loads(block.body)
        if "agent-apps" not in data.get("tool", {}):
            return  # another tool's table (a package's entry points)
        path = where / "pyproject.toml"
    else:
        data = yaml.safe_load(block.body)
        if "metadata" in data:  # a skill's frontmatter
            path = where / "doc.skill.md"
            path.write_text(f"---\ndescription: doc\n{block.body}---\nA doc example.\n", encoding="utf-8")
            return check_file(block, path)
        path = where / ("tools.yaml" if "tools" in data else "agent-apps.yaml")
    path.write_text(block.body, encoding="utf-8")
    check_file(block, path)


def run_python(source: str, where: str, namespace: dict | None = None) -> None:
    code = compile(source, where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    namespace = {"__name__": "__doc_example__", **(namespace or {})}
    result = eval(code, namespace)  # noqa: S307 - the repository's own docs
    if asyncio.iscoroutine(result):
        asyncio.run(result)


def manager(work: Path) -> ContextManager:
    skills = [work / "skills", ROOT / "examples" / "quickstart" / "skills"]
    return ContextManager(skills, cwd=work, env=False, user=False, entry_points=False)


def run_in_skill(block: Block, work: Path) -> None:
    """The block as the body of ``async def main(ctx, args)``: ``ctx`` is a real Context."""
    source = "async def main(ctx, args):\n" + textwrap.indent(block.body, "    ") + "\n    return None\n"
    namespace: dict = {}
    exec(compile(source, str(block), "exec"), namespace)  # noqa: S102 - the repository's own docs
    manager(work).invoke_sync({"main": namespace["main"], "name": "doc-example"})


def run_agent_code(block: Block, work: Path) -> None:
    """The block as one turn of a scripted model: it runs in the sandbox, and must not fail."""
    cm = manager(work)
    events: list[dict] = []
    cm.events.subscribe("doc", lambda topic, event: events.append(event))
    script = [{"code": block.body}, {"text": "done"}]
    cm.invoke_sync("agent", {"config": {"agent": "agent-scripted", "script": script}, "events": "doc"})
    errors = [e["result"] for e in events if e["type"] == "tool-error"]
    assert not errors, f"{block}: the agent code failed:\n{errors[0]}"


def run_console(block: Block) -> None:
    """Each ``$`` line as the reader would type it in a checkout (the docs' commands say
    ``--path examples/...``), in a real process, in the page's working directory."""
    cwd, status = Path.cwd(), 0
    commands: list[tuple[str, list[str]]] = []
    for line in block.body.splitlines():
        if line.startswith("$ "):
            commands.append((line[2:], []))
        elif commands:
            commands[-1][1].append(line)
    assert commands, f"{block}: a console block without '$ ' commands (use a text block)"
    for command, expected in commands:
        argv = shlex.split(command, comments=True)
        if argv[0] == "cd":
            cwd = (cwd / argv[1]).resolve()
            continue
        if argv == ["echo", "$?"]:
            got = [str(status)]
        else:
            assert argv[0] == "agent-apps", f"{block}: only agent-apps, cd and echo $? run here: {command}"
            run = subprocess.run(
                [sys.executable, "-m", "agent_apps", *argv[1:]],
                cwd=cwd,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=100,
            )
            status = run.returncode
            got = [line for line in run.stdout.splitlines() if not _NOISE.match(line)]
        assert matches(expected, got), (
            f"{block}: `{command}` printed\n" + "\n".join(got) + "\n--- but the docs show ---\n" + "\n".join(expected)
        )


def matches(expected: list[str], got: list[str]) -> bool:
    """``expected`` against ``got`` line by line; ``...`` is any text, a ``...`` line any lines."""
    if not expected:
        return not got
    head, rest = expected[0], expected[1:]
    if head.strip() == "...":
        return any(matches(rest, got[i:]) for i in range(len(got) + 1))
    pattern = ".*".join(re.escape(part) for part in head.rstrip().split("..."))
    return bool(got) and re.fullmatch(pattern, got[0].rstrip()) is not None and matches(rest, got[1:])


def test_ci_runs_the_readme_commands_exactly():
    """What CI runs is what a new user runs: each line of the README's first block is a
    line of .ci/run, and the install asks for the newest releases the ranges allow."""
    readme = next(block for block in blocks(ROOT / "README.md") if block.lang == "sh")
    lines = readme.body.strip().splitlines()
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2 and all(line in script for line in lines), (lines, script)
    assert "--upgrade --upgrade-strategy eager" in lines[0]
    assert script.index(lines[0]) < script.index(lines[1])


def test_top_level_await_is_explained_where_it_is_used():
    """A reader who pastes a block with a top-level ``await`` into a script gets a
    SyntaxError: each page with one says how to run it."""
    for doc in DOCS:
        for block in blocks(doc):
            if block.lang != "python" or block.mode.startswith(("agent-code", "in-skill", "pytest", "file")):
                continue
            if re.search(r"^(?:\w[\w, ]*=\s*)?await |^async (?:with|for) ", block.body, re.M):
                assert "python -m asyncio" in doc.read_text(encoding="utf-8"), f"{block}: top-level await, unexplained"
                break
