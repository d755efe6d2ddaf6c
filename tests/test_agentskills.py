"""Skills written for other agent tools (the Agent Skills specification): the folders in
tests/fixtures/agent-skills load, list and describe; the specification's rules are
warnings naming the file; foreign frontmatter never breaks loading; Claude-style tool
names restrict as their agent-apps equivalents do."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agent_apps import ContextManager
from agent_apps.agentskills import translate_allowed_tools
from agent_apps.cli import main
from agent_apps.testing.plugin import hermetic_manager
from agent_apps.tools.commands import simple_commands

FIXTURE = Path(__file__).parent / "fixtures" / "agent-skills"
LONG = "a-skill-name-that-goes-on-and-on-well-beyond-the-sixty-four-characters-allowed"


@pytest.fixture
def cm(tmp_path):
    return hermetic_manager([FIXTURE], tmp_path)


def test_every_folder_loads(cm):
    names = {s.name for s in cm.skills() if s.origin == "path"}
    assert names == {
        "pdf-forms",
        "git-history",
        "release-notes",
        "doc-style",
        "template-skill",
        "no-description",
        "colon-description",
        "claude-code",
        "-leading",
        "bad--name",
        LONG,
        "windows-notes",
    }
    assert cm.errors == []
    assert cm.get("release-notes").path.endswith("release-notes/skill.md")  # lowercase skill.md
    assert cm.get("colon-description").description == "Use this skill when: the user asks for a changelog"
    windows = cm.get("windows-notes")
    assert windows.description.startswith("Written on Windows") and windows.body == "Body."
    assert cm.get("pdf-forms").folder == str(FIXTURE / "pdf-forms")


def test_a_folder_with_both_files_uses_skill_md(tmp_path):
    folder = tmp_path / "skills" / "both"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\ndescription: upper\n---\nUpper.\n")
    (folder / "skill.md").write_text("---\ndescription: lower\n---\nLower.\n")
    cm = hermetic_manager([tmp_path / "skills"], tmp_path, bundled=False)
    assert cm.get("both").description == "upper" and cm.errors == []


WARNINGS = {
    "-leading/SKILL.md:1": "name '-leading' starts or ends with a hyphen",
    "bad--name/SKILL.md:1": "name 'bad--name' contains '--'",
    f"{LONG}/SKILL.md:1": "is 78 characters long; at most 64",
    "template/SKILL.md:2": "name 'template-skill' differs from its folder 'template'",
    "no-description/SKILL.md:1": "no description",
    "colon-description/SKILL.md:3": "invalid YAML (mapping values are not allowed in this context): read with the "
    "value of description quoted",
    "claude-code/SKILL.md:4": "allowed-tools: 'WebSearch' has no agent-apps equivalent; it is left out",
    "doc-style/SKILL.md:4": "metadata.category 'documentation' is not an agent-apps value (read, write, admin)",
}


def test_the_specifications_rules_are_warnings_naming_file_and_line(cm):
    warnings = cm.catalog.warnings
    for where, message in WARNINGS.items():
        assert any(w.startswith(f"{FIXTURE}/{where}: ") and message in w for w in warnings), (where, warnings)
    quiet = {"pdf-forms", "git-history", "release-notes", "windows-notes"}
    assert not [w for w in warnings if any(f"/{name}/" in w for name in quiet)]
    assert cm.get("template-skill").warnings  # each skill keeps its own


def test_list_counts_warnings_and_strict_makes_them_errors(cm, capsys):
    assert main(["list", "--path", str(FIXTURE)]) == 0
    out, err = capsys.readouterr()
    assert "template-skill" in out and "no-description" in out
    count = len(ContextManager(search_path=[FIXTURE]).catalog.warnings)
    warnings = f"{count} warning" if count == 1 else f"{count} warnings"
    assert f"{warnings} about skill files: 'agent-apps list --strict' shows them" in err
    assert "differs from its folder" not in err
    assert main(["list", "--strict", "--path", str(FIXTURE)]) == 1
    _, err = capsys.readouterr()
    assert f"{warnings}, errors with --strict:" in err and "differs from its folder 'template'" in err
    assert main(["list", "--json", "--path", str(FIXTURE)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["warnings"]) == count


def test_a_clean_search_path_passes_strict(tmp_path, capsys):
    skills = tmp_path / "skills"
    shutil.copytree(FIXTURE / "pdf-forms", skills / "pdf-forms")
    assert main(["list", "--strict", "--path", str(skills)]) == 0
    assert "warning" not in capsys.readouterr().err


def test_describe_shows_license_compatibility_and_warnings(cm, capsys):
    assert main(["describe", "git-history", "--path", str(FIXTURE)]) == 0
    out = capsys.readouterr().out
    assert "  compatibility: Requires git and jq" in out
    assert '  allowed-tools: shell(command=git) shell(command="git *") shell(command=jq)' in out
    data = cm.describe("pdf-forms")
    assert data["license"] == "Proprietary. LICENSE.txt has complete terms" and "warnings" not in data
    assert main(["describe", "template-skill", "--path", str(FIXTURE)]) == 0
    assert "  warning: " in capsys.readouterr().out


@pytest.mark.parametrize(
    ("written", "read", "notes"),
    [
        (
            "Bash(git:*) Bash(jq:*) Read",
            'shell(command=git) shell(command="git *") shell(command=jq) shell(command="jq *") file-read',
            0,
        ),
        ("Read, Grep, Glob", "file-read file-list", 0),
        ("Bash", "shell", 0),
        ("Bash(*)", "shell", 0),
        ("Bash(npm run test:*)", 'shell(command="npm run test") shell(command="npm run test *")', 0),
        ("Bash(git status)", 'shell(command="git status")', 0),
        ("Edit(./docs/**) Write(//tmp/out.txt)", "file-edit(path=docs/**) file-write(path=/tmp/out.txt)", 0),
        (
            "WebFetch(domain:example.com)",
            "http-fetch(url=https://example.com) http-fetch(url=https://example.com/*) "
            "http-fetch(url=http://example.com) http-fetch(url=http://example.com/*)",
            0,
        ),
        ("mcp__github__list_issues mcp__files", "github-list-issues files-*", 0),
        ("Task MultiEdit LS WebFetch", "agent file-edit file-list http-fetch", 0),
        ("WebSearch TodoWrite Read", "file-read", 2),
        ("Task(Explore)", "", 1),
        ("WebSearch", "", 1),
        ("file-* agent(allowed_tools=file-read)", "file-* agent(allowed_tools=file-read)", 0),
    ],
)
def test_claude_style_tool_names(written, read, notes):
    text, problems = translate_allowed_tools(written)
    assert text == read
    assert len(problems) == notes


def test_a_list_that_maps_to_nothing_allows_nothing(tmp_path):
    skills = tmp_path / "skills"
    (skills / "searcher").mkdir(parents=True)
    (skills / "searcher" / "SKILL.md").write_text("---\ndescription: d\nallowed-tools: WebSearch\n---\nBody.\n")
    cm = hermetic_manager([skills], tmp_path)
    skill = cm.get("searcher")
    assert skill.allowed_tools == ""
    assert cm.visible_tools(skill.allowed_tools, caller="searcher").tools == []


def test_foreign_metadata_is_set_aside_not_read(cm):
    skill = cm.get("doc-style")
    assert skill.metadata == {"owner": "docs-team"}
    assert skill.extra["metadata"] == {
        "category": "documentation",
        "model": "claude-sonnet-4",
        "role": "technical writer",
        "visibility": "public",
        "returns": "the edited Markdown",
    }
    assert not skill.hidden and not skill.is_middleware and skill.returns is None
    assert cm.config_for(skill).values["model"]["agent"] == "agent-strands"  # nothing from the foreign 'model'


@pytest.mark.anyio
async def test_an_unknown_category_does_not_make_a_skill_an_admin_tool(cm, tmp_path, write_skill, context_manager):
    """``category: documentation`` (valid in the specification) must not make a skill an
    admin tool, which unattended runs refuse; agent-apps' own categories still count."""
    unattended = {"security": {"mode": "unattended"}}
    script = {"model": {"agent": "agent-scripted", "script": [{"text": "styled"}]}}
    assert await cm.invoke("doc-style", config={**unattended, **script}) == "styled"
    for category, allowed in (("documentation", True), ("write", False), ("admin", False)):
        write_skill(
            f"c-{category}",
            f'frontmatter = {{"metadata": {{"category": "{category}"}}}}\n'
            "async def main(ctx, args):\n    return 'ran'\n",
        )
        context_manager.reload()
        if allowed:
            assert await context_manager.invoke(f"c-{category}", config=unattended) == "ran"
            assert any(
                "'documentation' is not one of read, write, admin" in w for w in context_manager.catalog.warnings
            )
        else:
            with pytest.raises(Exception, match="not permitted in unattended mode"):
                await context_manager.invoke(f"c-{category}", config=unattended)


@pytest.mark.parametrize(
    ("line", "parts"),
    [
        ("git status", ["git status"]),
        ("git log; rm -rf build", ["git log", "rm -rf build"]),
        ("git log | head -5 && ls || true &", ["git log", "head -5", "ls", "true"]),
        ('git commit -m "fix; tests" ', ['git commit -m "fix; tests"']),
        ("echo 'a | b' \\; c", ["echo 'a | b' \\; c"]),
        ("echo $(id)", None),
        ('echo "`id`"', None),
        ("echo '$(id)'", ["echo '$(id)'"]),
        ("diff <(ls) x", None),
        ("(cd x && make)\nmake install", ["cd x", "make", "make install"]),
    ],
)
def test_simple_commands(line, parts):
    assert simple_commands(line) == parts


@pytest.mark.anyio
async def test_a_command_constraint_holds_for_every_command_of_the_line(tmp_path):
    """``Bash(echo:*)`` lets the agent run echo, and nothing chained to it."""
    skills = tmp_path / "skills"
    (skills / "echoer").mkdir(parents=True)
    attempts = {
        "plain": "echo hi",
        "quoted": 'echo "a; b"',
        "chained": "echo hi; touch pwned",
        "piped": "echo hi | tee pwned",
        "substituted": 'echo "$(touch pwned)"',
        "other": "touch pwned",
    }
    code = (
        f"out = {{}}\nfor key, command in {attempts!r}.items():\n"
        "    try:\n        out[key] = (await ctx.manager.invoke('shell', {'command': command}))['stdout'].strip()\n"
        "    except Exception as exc:\n        out[key] = 'refused: ' + str(exc)\nctx.manager.finish(out)\n"
    )
    model = json.dumps({"agent": "agent-scripted", "script": [{"code": code}]})
    (skills / "echoer" / "SKILL.md").write_text(
        f"---\ndescription: Echoes.\nallowed-tools: Bash(echo:*)\nmetadata:\n  model: {model}\n---\nEcho.\n"
    )
    cm = hermetic_manager([skills], tmp_path)
    result = await cm.invoke("echoer", config={"security": {"mode": "interactive"}})
    assert result["plain"] == "hi" and result["quoted"] == "a; b"
    assert "'touch pwned' (a command of the line) is not allowed" in result["chained"]
    assert "'tee pwned' (a command of the line) is not allowed" in result["piped"]
    assert "command substitution" in result["substituted"]
    assert "ToolNotAllowed" in result["other"] or "may not call shell" in result["other"]
    assert not (tmp_path / "pwned").exists()
