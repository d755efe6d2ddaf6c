"""A skill reads its own folder: a ``NAME/SKILL.md`` skill's files are readable (read
only) by the code of the agent running that skill, and by nothing else, even when the
skill is installed under ~/.agent-apps/skills (a built-in denied path)."""

from __future__ import annotations

import json
import os

import pytest
from tools_helpers import make_manager

from agent_apps.testing import probe_model
from agent_apps.tools import PermissionDenied

pytestmark = pytest.mark.anyio

scripted = probe_model  # agent-scripted running the calls from agent code


@pytest.fixture
def home(tmp_path):
    """The user's agent-apps home with one installed skill folder, ``reader``."""
    home = tmp_path / "agent-apps-home"
    folder = home / "skills" / "reader"
    (folder / "references").mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\ndescription: Reads its own notes.\n---\nRead references/notes.md.\n")
    (folder / "references" / "notes.md").write_text("the skill's own notes\n")
    (home / "config.yaml").write_text("model: {max_turns: 5}\n")
    (home / "skills" / "other").mkdir()
    (home / "skills" / "other" / "SKILL.md").write_text("---\ndescription: Another skill.\n---\nNothing.\n")
    (home / "skills" / "other" / "private.md").write_text("other's file\n")
    return home


@pytest.fixture
def cm(home, workspace, tmp_path, skills_path):
    return make_manager(workspace, tmp_path, search_path=[skills_path], user=True)


INTERACTIVE = {"security": {"mode": "interactive"}}


def prompt_skill(path, calls, description="Reads its own notes."):
    """Write a prompt skill whose scripted agent makes ``calls``."""
    model = json.dumps(scripted(calls))
    path.write_text(f"---\ndescription: {description}\nmetadata:\n  model: {model}\n---\nRead references/notes.md.\n")


async def test_the_agent_running_a_skill_reads_its_folder_and_nothing_more(cm, home):
    folder = home / "skills" / "reader"
    os.symlink(home / "config.yaml", folder / "config-link.yaml")
    calls = {
        "read": ("file-read", {"path": str(folder / "references" / "notes.md")}),
        "list": ("file-list", {"path": str(folder), "recursive": True}),
        "write": ("file-write", {"path": str(folder / "references" / "notes.md"), "content": "overwritten"}),
        "edit": ("file-edit", {"path": str(folder / "SKILL.md"), "old_text": "Read", "new_text": "Wipe"}),
        "traversal": ("file-read", {"path": str(folder / ".." / "other" / "private.md")}),
        "home-config": ("file-read", {"path": str(home / "config.yaml")}),
        "symlink-out": ("file-read", {"path": str(folder / "config-link.yaml")}),
        "shell-cwd": ("shell", {"command": "cat references/notes.md", "cwd": str(folder)}),
    }
    prompt_skill(folder / "SKILL.md", calls)
    result = await cm.invoke("reader", config=INTERACTIVE)
    assert result["read"] == "ok: the skill's own notes\n"
    listed = json.loads(result["list"].removeprefix("ok: "))
    assert {e["name"] for e in listed["entries"]} >= {"SKILL.md", "references", os.path.join("references", "notes.md")}
    assert "config-link.yaml" not in {e["name"] for e in listed["entries"]}  # leads into a denied path
    for key in ("write", "edit", "traversal", "home-config", "symlink-out", "shell-cwd"):
        assert result[key].startswith("refused: "), (key, result[key])
        assert "denied path" in result[key], (key, result[key])
    assert (folder / "references" / "notes.md").read_text() == "the skill's own notes\n"
    assert "Read references" in (folder / "SKILL.md").read_text()


async def test_nothing_else_reads_the_folder(cm, home, write_skill, skills_path):
    notes = str(home / "skills" / "reader" / "references" / "notes.md")
    # a code skill the agent calls: its own reads are its own, not the agent's
    write_skill(
        "peek",
        f"""
        frontmatter = {{"description": "Reads a file for its caller."}}
        async def main(ctx, args):
            return await ctx.manager.invoke("file-read", {{"path": {notes!r}}})
        """,
    )
    # another prompt skill (its own agent), and a sub-agent, both started by reader's code
    read = {"read": ("file-read", {"path": notes})}
    prompt_skill(skills_path / "sibling.skill.md", read, "A sibling.")
    calls = {
        "through-a-skill": ("peek", {}),
        "sibling-agent": ("sibling", {}),
        "sub-agent": ("agent", {"prompt": "p", "config": scripted(read)}),
    }
    prompt_skill(home / "skills" / "reader" / "SKILL.md", calls)
    result = await cm.invoke("reader", config=INTERACTIVE)
    assert result["through-a-skill"].startswith("refused: ") and "denied path" in result["through-a-skill"]
    for key in ("sibling-agent", "sub-agent"):  # each finished with its own probe's result
        inner = json.loads(result[key].removeprefix("ok: "))
        assert inner["read"].startswith("refused: ") and "denied path" in inner["read"], (key, inner)
    # and a direct call, from outside any agent
    with pytest.raises(PermissionDenied, match="denied path"):
        await cm.invoke("file-read", {"path": notes}, config=INTERACTIVE)


async def test_a_folder_outside_the_workspace_is_readable_too(tmp_path, workspace):
    skills = tmp_path / "elsewhere"
    folder = skills / "guide"
    folder.mkdir(parents=True)
    (folder / "guide.txt").write_text("guidance\n")
    (skills / "loose.txt").write_text("next to the folder\n")
    (skills / "guide-extra").mkdir()
    (skills / "guide-extra" / "x.txt").write_text("a sibling sharing the folder's name as a prefix\n")
    calls = {
        "own": ("file-read", {"path": str(folder / "guide.txt")}),
        "beside": ("file-read", {"path": str(skills / "loose.txt")}),
        "prefix-sibling": ("file-read", {"path": str(skills / "guide-extra" / "x.txt")}),
    }
    prompt_skill(folder / "SKILL.md", calls)
    cm = make_manager(workspace, tmp_path, search_path=[skills])
    result = await cm.invoke("guide", config=INTERACTIVE)
    assert result["own"] == "ok: guidance\n"
    for key in ("beside", "prefix-sibling"):
        assert result[key].startswith("refused: ") and "outside the allowed paths" in result[key], key


async def test_a_folder_outside_the_home_lifts_no_denial(tmp_path, workspace):
    """A skill's folder outside the agent-apps home reads its own files only: the home
    stays denied, and so does a user's denied path that holds the folder."""
    skills = tmp_path / "elsewhere"
    folder = skills / "guide"
    folder.mkdir(parents=True)
    (folder / "guide.txt").write_text("guidance\n")
    home = tmp_path / "agent-apps-home"
    home.mkdir()
    (home / "config.yaml").write_text("model: {max_turns: 5}\n")
    calls = {"own": ("file-read", {"path": str(folder / "guide.txt")}),
             "home-config": ("file-read", {"path": str(home / "config.yaml")})}
    prompt_skill(folder / "SKILL.md", calls)
    cm = make_manager(workspace, tmp_path, search_path=[skills])
    result = await cm.invoke("guide", config={"security": {"mode": "interactive", "allowed_paths": ["/"]}})
    assert result["own"] == "ok: guidance\n"
    assert result["home-config"].startswith("refused: ") and "denied path" in result["home-config"]
    denied = {"security": {"mode": "interactive", "denied_paths": [str(skills)]}}
    result = await cm.invoke("guide", config=denied)
    assert result["own"].startswith("refused: ") and "denied path" in result["own"]


async def test_a_folder_holding_the_home_does_not_open_it(tmp_path, workspace):
    """The folder of a skill may hold the agent-apps home (a project keeping its own):
    the folder is readable, the home inside it is not."""
    folder = tmp_path / "proj"
    home = folder / "agent-apps-home"
    home.mkdir(parents=True)
    (home / "config.yaml").write_text("model: {max_turns: 5}\n")
    (folder / "notes.md").write_text("the project's notes\n")
    calls = {"own": ("file-read", {"path": str(folder / "notes.md")}),
             "home-config": ("file-read", {"path": str(home / "config.yaml")})}
    prompt_skill(folder / "SKILL.md", calls)
    cm = make_manager(workspace, folder, search_path=[tmp_path])
    result = await cm.invoke("proj", config=INTERACTIVE)
    assert result["own"] == "ok: the project's notes\n"
    assert result["home-config"].startswith("refused: ") and "denied path" in result["home-config"]


async def test_denials_inside_the_folder_still_hold(cm, home):
    folder = home / "skills" / "reader"
    (folder / "key.pem").write_text("-----BEGIN-----\n")
    prompt_skill(folder / "SKILL.md", {"pem": ("file-read", {"path": str(folder / "key.pem")})})
    result = await cm.invoke("reader", config={"security": {"mode": "interactive", "denied_paths": ["*.pem"]}})
    assert result["pem"].startswith("refused: ") and "*.pem" in result["pem"]


def test_the_agent_is_told_where_its_files_are(cm, home):
    from agent_apps.agent.prompt import system_prompt

    skill = cm.get("reader")
    assert skill.folder == str(home / "skills" / "reader")
    text = system_prompt("p", cm.visible_tools(None), skill_dir=skill.folder)
    assert f"This skill's own files are in `{skill.folder}`" in text
