"""The parse cache: unchanged skill files are not parsed again, a changed one always is."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from agent_apps import loading, parse_cache
from agent_apps.searchpath import Root, scan

CODE = 'frontmatter = {{"description": "{desc}", "metadata": {{"tags": ["t"]}}}}\nasync def main(ctx, args):\n    ...\n'
PROMPT = "---\ndescription: {desc}\nallowed-tools: Read NotebookEdit\n---\nDo it.\n"


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A skill directory, a private cache directory, and files that count as settled at
    once (a test cannot wait :data:`parse_cache.SETTLE_NS` for them)."""
    monkeypatch.setenv("AGENT_APPS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(parse_cache, "SETTLE_NS", -10**12)
    skills = tmp_path / "skills"
    skills.mkdir()
    (skills / "code.skill.py").write_text(CODE.format(desc="one"))
    (skills / "prompt.skill.md").write_text(PROMPT.format(desc="two"))
    return skills


def found(root: Path) -> dict[str, dict]:
    """What a scan of ``root`` finds, as a new process would (a new cache object)."""
    skills = {}
    for item in scan(Root(root, "path")):
        assert not isinstance(item, Exception), item
        skills[item.name] = {**item.describe(), "warnings": list(item.warnings)}
    return skills


def unparsable(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(text: str, path: str) -> None:
        raise AssertionError(f"{path} was parsed again")

    monkeypatch.setattr(loading, "_parse_code", refuse)
    monkeypatch.setattr(loading, "_parse_prompt", refuse)


def test_an_unchanged_file_is_built_from_the_cache_exactly_as_from_its_text(root, monkeypatch):
    first = found(root)
    assert first["prompt"]["warnings"]  # a Claude tool with no equivalent: a note
    unparsable(monkeypatch)
    assert found(root) == first
    assert found(root) == first  # what the first build did to its objects never reaches the cache


def test_a_rewritten_file_is_parsed_again_even_with_its_old_size_and_mtime(root):
    path = root / "code.skill.py"
    assert found(root)["code"]["description"] == "one"
    before = path.stat()
    deadline = time.monotonic() + 2
    while path.stat().st_ctime_ns == before.st_ctime_ns and time.monotonic() < deadline:
        path.write_text(CODE.format(desc="won"))  # the same size
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # cp -p, touch -d
        time.sleep(0.005)
    assert path.stat().st_size == before.st_size and path.stat().st_mtime_ns == before.st_mtime_ns
    assert found(root)["code"]["description"] == "won"


def test_a_replaced_or_deleted_file_is_not_served(root):
    found(root)
    (root / "new.skill.py").write_text(CODE.format(desc="three"))
    os.replace(root / "new.skill.py", root / "code.skill.py")  # an editor's atomic save
    (root / "prompt.skill.md").unlink()
    assert {name: s["description"] for name, s in found(root).items()} == {"code": "three"}


def test_fresh_files_are_not_kept(root, monkeypatch):
    """Two writes within one tick of the file system's clock could leave one key: a file
    is kept only once its times are older than SETTLE_NS."""
    monkeypatch.setattr(parse_cache, "SETTLE_NS", 10**12)
    found(root)
    assert not parse_cache.cache_dir().exists()


def test_files_that_fail_to_load_are_parsed_every_time(root):
    (root / "broken.skill.py").write_text("frontmatter = {'description': open('x')}\n")
    for _ in range(2):
        errors = [item for item in scan(Root(root, "path")) if isinstance(item, Exception)]
        assert [e.line for e in errors] == [1] and "literal" in str(errors[0])


def test_values_marshal_cannot_keep_are_parsed_each_time(root, monkeypatch):
    (root / "dated.skill.md").write_text("---\ndescription: dated\nreleased: 2024-01-02\n---\nbody\n")
    first = found(root)
    monkeypatch.setattr(loading, "_parse_code", lambda text, path: pytest.fail("code parsed again"))
    assert found(root) == first  # the dated file was parsed again, the others were not


@pytest.mark.parametrize(
    "spoil",
    [
        lambda f: f.write_bytes(f.read_bytes()[: len(f.read_bytes()) // 2]),  # cut short
        lambda f: f.write_bytes(b"not marshal at all"),
        lambda f: f.chmod(0o666),  # another user could have written it
    ],
    ids=["truncated", "garbage", "writable-by-others"],
)
def test_a_spoiled_cache_file_is_ignored(root, spoil, monkeypatch):
    first = found(root)
    (cache,) = parse_cache.cache_dir().iterdir()
    spoil(cache)
    parsed: list[str] = []
    original = loading._parse_code
    monkeypatch.setattr(loading, "_parse_code", lambda text, path: parsed.append(path) or original(text, path))
    assert found(root) == first
    assert parsed == [str(root / "code.skill.py")]


def test_another_version_of_agent_apps_or_of_the_parser_starts_afresh(root, monkeypatch):
    found(root)
    monkeypatch.setattr(parse_cache, "_STAMP", ("another", "version"))
    parsed: list[str] = []
    original = loading._parse_code
    monkeypatch.setattr(loading, "_parse_code", lambda text, path: parsed.append(path) or original(text, path))
    found(root)
    assert parsed == [str(root / "code.skill.py")]


def test_the_cache_keeps_one_file_per_directory_and_prunes_the_oldest(root, monkeypatch, tmp_path):
    monkeypatch.setattr(parse_cache, "MAX_FILES", 2)
    others = []
    for i in range(3):
        other = tmp_path / f"other{i}"
        other.mkdir()
        (other / "code.skill.py").write_text(CODE.format(desc=str(i)))
        others.append(other)
    for directory in [root, *others]:
        found(directory)
        time.sleep(0.01)
    assert len(list(parse_cache.cache_dir().iterdir())) == 2


def test_a_projects_pyproject_table_is_kept_too(root, tmp_path, monkeypatch):
    import tomllib

    from agent_apps import ContextManager

    loads: list[str] = []
    load = tomllib.loads
    monkeypatch.setattr(tomllib, "loads", lambda text: loads.append(text) or load(text))
    project = tmp_path / "project"
    project.mkdir()
    pyproject = project / "pyproject.toml"
    pyproject.write_text('[project]\nname = "p"\n\n[tool.agent-apps.model]\nmodel_id = "kept"\n')

    def model_id() -> str | None:  # a new manager, as in a new process
        cm = ContextManager([], cwd=project, env=False, user=False, entry_points=False, bundled=False)
        return cm.config_for(None).values["model"].get("model_id")

    assert [model_id(), model_id()] == ["kept", "kept"] and len(loads) == 1
    pyproject.write_text('[project]\nname = "p"\n\n[tool.agent-apps.model]\nmodel_id = "newer"\n')
    assert model_id() == "newer" and len(loads) == 2  # another size: the racy rule is off here
    pyproject.write_text('[project]\nname = "p"\n')  # no table: that is kept as well
    assert [model_id(), model_id()] == [None, None] and len(loads) == 3
