"""Guidance skills loaded on demand: which skills are guidance, how the prompt lists
them, what load-skills returns, the folder it opens for reading, and how a session
remembers what was loaded. The skills are tests/fixtures/guidance-skills."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agent_apps import ContextManager
from agent_apps.cli import main
from agent_apps.testing import probe_model

pytestmark = pytest.mark.anyio

FIXTURE = Path(__file__).parent.parent / "fixtures" / "guidance-skills"

ECHO = """
frontmatter = {
    "params": {"type": "object"}, "metadata": {"visibility": "hidden", "tags": ["meta-internal", "provider"]}
}
async def main(ctx, args):
    return args["prompt"]
"""

def probe(calls):
    """Agent code that makes ``calls`` and finishes with what each did."""
    return probe_model(calls)["script"][0]["code"]


@pytest.fixture
def skills(tmp_path):
    """A copy of the fixtures (tests may add to it), as the manager's first search path entry."""
    folder = tmp_path / "guidance"
    shutil.copytree(FIXTURE, folder)
    return folder


@pytest.fixture
def cm(skills, tmp_path, write_skill, skills_path):
    write_skill("echo-provider", ECHO)
    from agent_apps.tools import ToolsPlugin

    work = tmp_path / "work"  # the file tools' workspace: the skills' folders are outside it
    work.mkdir()
    return ContextManager(
        search_path=[skills, skills_path], cwd=work, home=tmp_path / "home", env=False, project=False,
        user=False, entry_points=False, plugins=[ToolsPlugin()],
    )


async def agent(cm, code, *, session=None, read_only=False, **args):
    """Run ``code`` as a scripted agent's one turn; returns what it finished with."""
    config = {"agent": "agent-scripted", "script": [{"code": code}]}
    call = {"prompt": "P", "user_message": "Go.", "config": config, **args}
    options = {"session": session, "read_only": read_only} if session else {}
    return await cm.invoke("agent", call, config={"security": {"mode": "interactive"}}, **options)


def test_which_skills_are_guidance(cm):
    guidance = {s.name for s in cm.skills() if s.guidance}
    assert guidance == {"code-review", "release-steps", "style-guide"}
    assert cm.errors == []
    # an Agent Skills folder loads in its public shape: license, tools, metadata kept
    review = cm.get("code-review")
    assert review.extra["license"] == "Apache-2.0" and review.metadata["author"] == "example-org"
    assert review.allowed_tools == 'file-read file-list shell(command=python) shell(command="python *")'
    assert review.warnings == []


async def test_the_prompt_lists_guidance_by_name_and_description_only(cm):
    prompt = await cm.invoke("agent", {"prompt": "P", "config": {"agent": "echo-provider"}})
    section = prompt.split("## Guidance you can load\n")[1]
    assert "- code-review: Review Python changes for correctness, tests and security." in section
    assert "- release-steps: The steps of a release" in section and "- style-guide: House style" in section
    assert "Reviewing Python code" not in prompt and "No exclamation marks" not in prompt  # bodies are not
    assert '`await ctx.manager.invoke("load-skills", {"skills": ["code-review"]})`' in section
    assert "async def code_review(" not in prompt  # guidance is loaded, not called
    # agents and typed sub-agents are not guidance
    for name in ("runner", "typed-report", "summarize"):
        assert f"- {name}:" not in section


async def test_load_skills_returns_the_body_and_the_files_and_opens_the_folder(cm, skills, write_skill):
    folder = skills / "code-review"
    checklist = str(folder / "references" / "CHECKLIST.md")
    calls = {
        "before": ("file-read", {"path": checklist}),
        "load": ("load-skills", {"skills": ["code-review", "style-guide"]}),
        "after": ("file-read", {"path": checklist}),
        "script": ("file-read", {"path": str(folder / "scripts" / "lint.py")}),
        "write": ("file-write", {"path": checklist, "content": "gone"}),
        "other": ("file-read", {"path": str(skills / "runner" / "SKILL.md")}),
    }
    result = await agent(cm, probe(calls))
    assert result["before"].startswith("refused: ")
    loaded = result["load"].removeprefix("ok: ")
    assert loaded.startswith("# Guidance: code-review\n\nFolder: " + str(folder))
    assert "Files: LICENSE.txt, SKILL.md, references/CHECKLIST.md, scripts/lint.py" in loaded
    assert "# Reviewing Python code" in loaded and "# Guidance: style-guide" in loaded
    assert "No exclamation marks." in loaded
    assert result["after"] == "ok: " + (folder / "references" / "CHECKLIST.md").read_text()
    assert result["script"].startswith("ok: ") and "line too long" in result["script"]
    assert result["write"].startswith("refused: ") and "outside the allowed paths" in result["write"]  # read only
    assert result["other"].startswith("refused: ")
    assert "Every new function has a test." in (folder / "references" / "CHECKLIST.md").read_text()


async def test_only_the_agent_that_loaded_it_reads_the_folder(cm, skills, write_skill):
    checklist = str(skills / "code-review" / "references" / "CHECKLIST.md")
    write_skill("peek", f"""
        frontmatter = {{"description": "Reads a file for its caller."}}
        async def main(ctx, args):
            return await ctx.manager.invoke("file-read", {{"path": {checklist!r}}})
        """)
    sub = probe_model({"read": ("file-read", {"path": checklist})})
    calls = {
        "load": ("load-skills", {"skills": ["code-review"]}),
        "through-a-skill": ("peek", {}),
        "sub-agent": ("agent", {"prompt": "p", "config": sub}),
    }
    result = await agent(cm, probe(calls))
    assert result["load"].startswith("ok: ")
    assert result["through-a-skill"].startswith("refused: ")
    inner = json.loads(result["sub-agent"].removeprefix("ok: "))
    assert inner["read"].startswith("refused: ")


async def test_load_skills_names_what_it_cannot_load(cm):
    calls = {
        "agent-skill": ("load-skills", {"skills": ["code-review", "runner"]}),
        "typo": ("load-skills", {"skills": ["code-reveiw"]}),
        "tool": ("load-skills", {"skills": ["file-read"]}),
    }
    result = await agent(cm, probe(calls))
    assert result["agent-skill"] == (
        "refused: load-skills: invalid args at skills[1]: 'runner' is not a guidance skill you can load; "
        "those you can: code-review, release-steps, style-guide"
    )
    assert "(did you mean 'code-review'?)" in result["typo"]
    assert "'file-read' is not a guidance skill" in result["tool"]


async def test_in_constrained_mode_named_guidance_is_listed_and_loadable(cm):
    code = probe({"load": ("load-skills", {"skills": ["style-guide"]}),
                  "not-named": ("load-skills", {"skills": ["code-review"]})})
    result = await agent(cm, code, allowed_tools="file-read style-guide")
    assert result["load"].startswith("ok: # Guidance: style-guide")
    assert "those you can: style-guide" in result["not-named"]
    prompt = await cm.invoke("agent", {"prompt": "P", "allowed_tools": "file-read style-guide",
                                       "config": {"agent": "echo-provider"}})
    assert "- style-guide: House style" in prompt and "code-review" not in prompt


async def test_a_session_remembers_what_was_loaded(cm, skills):
    checklist = str(skills / "code-review" / "references" / "CHECKLIST.md")
    first = await agent(cm, probe({"load": ("load-skills", {"skills": ["code-review"]})}), session="s1")
    assert first["load"].startswith("ok: ")
    assert cm.state.sessions.get("s1").meta["loaded_skills"] == ["code-review"]
    # the next run of the session: the body is in its prompt, the folder readable without loading again
    second = await agent(cm, probe({"read": ("file-read", {"path": checklist})}), session="s1")
    assert second["read"].startswith("ok: # Review checklist")
    prompt = await cm.invoke("agent", {"prompt": "P", "config": {"agent": "echo-provider"}}, session="s1")
    loaded = prompt.split("## Guidance you loaded earlier\n")[1]
    assert "# Guidance: code-review" in loaded and "Go through [the checklist]" in loaded
    # another session, or no session, starts with nothing loaded
    other = await agent(cm, probe({"read": ("file-read", {"path": checklist})}), session="s2")
    assert other["read"].startswith("refused: ")
    assert "## Guidance you loaded earlier" not in await cm.invoke(
        "agent", {"prompt": "P", "config": {"agent": "echo-provider"}}
    )


async def test_reset_guidance_forgets_what_the_session_loaded_and_keeps_its_messages(cm, skills):
    checklist = str(skills / "code-review" / "references" / "CHECKLIST.md")
    await agent(cm, probe({"load": ("load-skills", {"skills": ["code-review"]})}), session="s1")
    messages = cm.state.sessions.messages("s1")
    assert cm.state.sessions.reset_guidance("s1") == ["code-review"]
    # the next run: no text in its prompt, the folder closed again; the history is whole
    prompt = await cm.invoke("agent", {"prompt": "P", "config": {"agent": "echo-provider"}}, session="s1")
    assert "## Guidance you loaded earlier" not in prompt
    again = await agent(cm, probe({"read": ("file-read", {"path": checklist})}), session="s1")
    assert again["read"].startswith("refused: ")
    assert cm.state.sessions.messages("s1")[: len(messages)] == messages
    # loading it again works as the first time
    await agent(cm, probe({"load": ("load-skills", {"skills": ["code-review"]})}), session="s1")
    assert cm.state.sessions.get("s1").meta["loaded_skills"] == ["code-review"]


async def test_a_reset_during_a_run_is_not_undone_by_what_the_run_loads_next(cm, write_skill):
    # another process resets the session's guidance while a run of it is in progress
    write_skill("resetter", "frontmatter = {}\nasync def main(ctx, args):\n"
                "    return ctx.manager.context_manager.state.sessions.reset_guidance('s1')\n")  # fmt: skip
    calls = {
        "first": ("load-skills", {"skills": ["code-review"]}),
        "reset": ("resetter", {}),
        "then": ("load-skills", {"skills": ["style-guide", "code-review"]}),
    }
    done = await agent(cm, probe(calls), session="s1")
    assert done["reset"] == 'ok: ["code-review"]' and done["then"].startswith("ok: ")
    assert cm.state.sessions.get("s1").meta["loaded_skills"] == ["style-guide", "code-review"]  # loaded after it
    calls = {"reset": ("resetter", {}), "other": ("load-skills", {"skills": ["release-steps"]})}
    await agent(cm, probe(calls), session="s1")
    assert cm.state.sessions.get("s1").meta["loaded_skills"] == ["release-steps"]  # not what it got from before


async def test_guidance_loaded_off_the_record_is_not_remembered(cm, skills):
    checklist = str(skills / "code-review" / "references" / "CHECKLIST.md")
    await agent(cm, probe({"read": ("file-read", {"path": "nothing"})}), session="s1")  # the session exists
    code = probe({"load": ("load-skills", {"skills": ["code-review"]}), "read": ("file-read", {"path": checklist})})
    loaded = await agent(cm, code, session="s1", read_only=True)
    assert loaded["load"].startswith("ok: ") and loaded["read"].startswith("ok: ")  # within the run, as usual
    assert "loaded_skills" not in cm.state.sessions.get("s1").meta
    later = await agent(cm, probe({"read": ("file-read", {"path": checklist})}), session="s1")
    assert later["read"].startswith("refused: ")


async def test_a_guidance_skill_invoked_directly_still_runs_as_an_agent(cm, skills):
    (skills / "release-steps" / "agent-apps.yaml").write_text(
        "model: {agent: agent-scripted, script: [{text: 'Released.'}]}\n"
    )
    assert cm.get("release-steps").guidance
    assert await cm.invoke("release-steps", {"task": "cut 1.2"}) == "Released."


def test_describe_and_list_say_guidance(cm, skills, capsys, tmp_path):
    code = main(["describe", "code-review", "--path", str(skills)])
    out = capsys.readouterr().out
    assert code == 0 and "guidance: yes (agents load it with load-skills)" in out and "license: Apache-2.0" in out
    listed = cm.invoke_sync("skill-list", {"match": "*-*"})
    assert {"name": "code-review", "description": "(guidance) Review Python changes for correctness, tests and "
            "security. Use when asked to review a diff, a pull request or a file."} in listed


def test_a_skill_md_with_bad_frontmatter_names_its_file_and_line(skills, tmp_path, capsys):
    bad = skills / "broken"
    bad.mkdir()
    (bad / "SKILL.md").write_text("---\nname: broken\ndescription: [unclosed\nlicense: MIT\n---\nBody.\n")
    cm = ContextManager(search_path=[skills], cwd=tmp_path, home=tmp_path / "home", env=False, project=False,
                        user=False, entry_points=False)
    (error,) = cm.errors
    assert str(error).startswith(f"{bad / 'SKILL.md'}:4: bad YAML frontmatter")
    assert {s.name for s in cm.skills() if s.guidance} == {"code-review", "release-steps", "style-guide"}
    main(["list", "--path", str(skills)])
    assert f"{bad / 'SKILL.md'}:4" in capsys.readouterr().err


def test_the_agent_skills_fixtures_list_and_load_cleanly(tmp_path):
    """The folders written in the shapes of the public collections (issue 18's fixtures)."""
    folder = FIXTURE.parent / "agent-skills"
    cm = ContextManager(search_path=[folder], cwd=tmp_path, home=tmp_path / "home", env=False, project=False,
                        user=False, entry_points=False)
    names = sorted(s.name for s in cm.skills() if s.origin == "path" and s.guidance)
    assert "pdf-forms" in names and "git-history" in names and len(names) == 12
    text = cm.invoke_sync("load-skills", {"skills": names})
    assert text.count("# Guidance: ") == len(names)
    assert (
        "Files: LICENSE.txt, SKILL.md, assets/values-template.json, references/FIELDS.md, scripts/fill.py" in text
    )
    assert "1. Read [the field guide](references/FIELDS.md)" in text
