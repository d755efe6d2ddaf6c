"""Skill files: code skills read without importing them, prompt skills, broken files."""

from __future__ import annotations

import sys

import pytest

from agent_apps import ContextManager, SkillLoadError
from agent_apps.loading import load_file

GOOD = """
frontmatter = {
    "description": "Count the words in a text.",
    "params": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    "metadata": {"returns": {"type": "integer"}, "tags": ["text"]},
}

async def main(ctx, args):
    return len(args["text"].split())
"""


def test_code_skill_frontmatter_is_read_without_importing(write_skill, context_manager):
    path = write_skill("word-count", GOOD + "\nraise SystemExit('imported!')\n")
    skill = context_manager.get("word-count")
    assert skill.name == "word-count"  # default: the file name
    assert skill.description == "Count the words in a text."
    assert skill.returns == {"type": "integer"}
    assert skill.tags == ["text"]
    assert skill.path == str(path) and skill.line == 1
    assert not skill.loaded


def test_module_is_imported_on_first_invoke_then_cached(write_skill, context_manager, tmp_path):
    counter = tmp_path / "imports"
    write_skill(
        "counted",
        f"""
        from pathlib import Path
        p = Path({str(counter)!r}); p.write_text(p.read_text() + "x" if p.exists() else "x")
        frontmatter = {{}}
        def main(ctx, args):
            return "ok"
        """,
    )
    assert context_manager.invoke_sync("counted") == "ok"
    assert context_manager.invoke_sync("counted") == "ok"
    assert counter.read_text() == "x"


def test_skill_can_import_its_neighbours_relatively(write_skill, context_manager):
    write_skill("helpers.py", "def shout(s):\n    return s.upper()\n")
    write_skill(
        "loud", "from .helpers import shout\nfrontmatter = {}\nasync def main(ctx, args):\n    return shout('hi')\n"
    )
    assert context_manager.invoke_sync("loud") == "HI"
    assert not any(p.endswith("skills") for p in sys.path)


def test_prompt_skills_md_and_folder(write_skill, context_manager):
    write_skill(
        "summarize.skill.md",
        """
        ---
        description: Summarize a text.
        allowed-tools: file-read
        metadata:
          returns: {type: string}
        ---
        You summarize texts in one line.
        """,
    )
    write_skill(
        "pdf-tools/SKILL.md",
        """
        ---
        name: pdf-tools
        description: Work with PDF files.
        license: Apache-2.0
        allowed-tools: [Read, Bash]
        ---
        # PDF tools
        Use scripts/extract.py.
        """,
    )
    summarize = context_manager.get("summarize")
    assert summarize.kind == "prompt"
    assert summarize.body == "You summarize texts in one line."
    assert summarize.allowed_tools == "file-read"
    assert summarize.params["properties"]["task"]["type"] == "string"
    pdf = context_manager.get("pdf-tools")
    assert pdf.extra == {"license": "Apache-2.0"}
    assert pdf.allowed_tools == "file-read shell"  # Claude-style names, read as agent-apps skills
    assert pdf.body.startswith("# PDF tools")


BROKEN = {
    "syntax.skill.py": ("frontmatter = {}\ndef main(ctx, args)\n    return 1\n", 2, "syntax error"),
    "nonliteral.skill.py": (
        'import os\nfrontmatter = {\n    "description": os.getcwd(),\n}\ndef main(ctx, args): ...\n',
        3,
        "must be a literal",
    ),
    "badkey.skill.py": (
        'frontmatter = {\n    "paramz": {},\n}\ndef main(ctx, args): ...\n',
        2,
        "did you mean 'params'",
    ),
    "badtype.skill.py": ('frontmatter = {\n  "description": 3,\n}\ndef main(ctx, args): ...\n', 2, "must be a str"),
    "Bad_Name.skill.py": ("frontmatter = {}\ndef main(ctx, args): ...\n", 1, "invalid skill name 'Bad_Name'"),
    "nomain.skill.py": ("frontmatter = {}\nx = 1\n", 1, "no main function"),
    "nofm.skill.py": ("def main(ctx, args): ...\n", 1, "no 'frontmatter"),
    "badyaml.skill.md": ("---\ndescription: ok\nparams: [unclosed\n---\nbody\n", 4, "bad YAML"),
    "nofence.skill.md": ("just text\n", 1, "missing YAML frontmatter"),
    "badparams.skill.py": (
        'frontmatter = {\n  "params": {"type": "string"},\n}\ndef main(ctx, args): ...\n',
        2,
        "must describe an object",
    ),
    "syncmw.skill.py": (
        'frontmatter = {"metadata": {"role": "middleware"}}\ndef main(ctx, args):\n    return 1\n',
        2,
        "must be 'async def'",
    ),
}


@pytest.mark.parametrize("filename", sorted(BROKEN))
def test_broken_file_gives_one_clear_error_with_file_and_line(filename, write_skill, context_manager):
    source, line, words = BROKEN[filename]
    path = write_skill(filename, source)
    write_skill("good", GOOD)
    errors = context_manager.errors
    assert len(errors) == 1, errors
    error = errors[0]
    assert isinstance(error, SkillLoadError)
    assert error.path == str(path) and error.line == line, str(error)
    assert str(error).startswith(f"{path}:{line}: ")
    assert words in str(error)
    # every other skill still loads and runs
    assert context_manager.invoke_sync("good", {"text": "a b"}) == 2


def test_import_error_at_first_invoke_names_file_and_line(write_skill, context_manager):
    path = write_skill(
        "boom", "frontmatter = {}\nimport json\nraise RuntimeError('bad module')\ndef main(ctx, args): ...\n"
    )
    with pytest.raises(SkillLoadError) as info:
        context_manager.invoke_sync("boom")
    assert info.value.path == str(path) and info.value.line == 3
    assert "RuntimeError: bad module" in str(info.value)


def test_invalid_params_schema_is_reported_with_line_on_first_use(write_skill, context_manager):
    path = write_skill(
        "typo",
        'frontmatter = {\n    "params": {"properties": {"x": {"type": "strnig"}}},\n}\n'
        'async def main(ctx, args): ...\n',
    )
    with pytest.raises(SkillLoadError) as info:
        context_manager.describe("typo")
    assert info.value.line == 2 and str(path) in str(info.value)
    assert "not a valid JSON Schema" in str(info.value)


def test_invalid_returns_schema_fails_before_the_skill_runs(write_skill, context_manager, tmp_path):
    marker = tmp_path / "ran"
    path = write_skill(
        "sloppy",
        f'frontmatter = {{\n    "metadata": {{"returns": {{"type": "numbr"}}}},\n}}\n'
        f"async def main(ctx, args):\n    open({str(marker)!r}, 'w').close()\n    return 1\n",
    )
    with pytest.raises(SkillLoadError) as info:
        context_manager.invoke_sync("sloppy")
    assert str(info.value).startswith(f"{path}:2: metadata.returns.type is not a valid JSON Schema")
    assert not marker.exists()


def test_load_file_rejects_non_skill_files(tmp_path):
    other = tmp_path / "notes.txt"
    other.write_text("x")
    with pytest.raises(SkillLoadError, match="not a skill file"):
        load_file(other, origin="path")


def test_unreadable_directory_entries_do_not_break_listing(tmp_path):
    root = tmp_path / "skills"
    (root / ".hidden").mkdir(parents=True)
    (root / ".hidden" / "secret.skill.py").write_text("frontmatter = {}\ndef main(ctx, args): ...\n")
    (root / "__pycache__").mkdir()
    cm = ContextManager([root], cwd=tmp_path, env=False, project=False, user=False, entry_points=False, bundled=False)
    assert cm.skills() == [] and cm.errors == []


@pytest.mark.parametrize(
    ("frontmatter", "words"),
    [
        ('{"metadata": {"model": 5}}', "'metadata.model' must be a mapping"),
        ('{"metadata": {"model": {"max_turns": "many"}}}', "'metadata.model.max_turns' must be an integer"),
        ('{"allowed-tools": "file-read(path="}', "missing ')'"),
    ],
)
def test_bad_metadata_and_allowed_tools_are_load_errors(write_skill, context_manager, frontmatter, words):
    path = write_skill("odd", f"frontmatter = {frontmatter}\nasync def main(ctx, args): ...\n")
    (error,) = context_manager.errors
    assert error.path == str(path) and words in str(error)


def test_invoking_a_broken_skill_shows_why_not_unknown(write_skill, context_manager):
    path = write_skill("broken", "frontmatter = {\n")
    with pytest.raises(SkillLoadError) as info:
        context_manager.invoke_sync("broken")
    assert str(info.value).startswith(f"{path}:1: syntax error")


def test_two_skills_of_one_name_in_one_tree_is_an_error(write_skill, context_manager, skills_path):
    first = write_skill("a-one", 'frontmatter = {"name": "twin"}\nasync def main(ctx, args):\n    return 1\n')
    second = write_skill("b-two", 'frontmatter = {"name": "twin"}\nasync def main(ctx, args):\n    return 2\n')
    assert context_manager.invoke_sync("twin") == 1
    (error,) = context_manager.errors
    assert error.path == str(second) and f"{first}:1 wins" in str(error)
