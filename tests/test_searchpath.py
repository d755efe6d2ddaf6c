"""The search path: order, first match wins, origins, plugins."""

from __future__ import annotations

import sys
from pathlib import Path

from agent_apps import ContextManager, hookimpl

SKILL = 'frontmatter = {{"description": "{desc}"}}\nasync def main(ctx, args):\n    return "{desc}"\n'


def put(directory: Path, name: str, desc: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.skill.py"
    path.write_text(SKILL.format(desc=desc))
    return path


def test_order_and_origins(tmp_path, monkeypatch):
    explicit, env_dir = tmp_path / "explicit", tmp_path / "env"
    project, home = tmp_path / "project", tmp_path / "home"
    monkeypatch.setenv("AGENT_APPS_PATH", str(env_dir))
    monkeypatch.setenv("AGENT_APPS_HOME", str(home))
    put(explicit, "a", "explicit")
    put(env_dir, "a", "env")
    put(env_dir, "b", "env")
    put(project / "skills", "b", "project")
    put(project / "skills", "c", "project")
    put(home / "skills", "c", "user")
    put(home / "skills", "skill-list", "user shadows bundled")
    cm = ContextManager([explicit], cwd=project, entry_points=False)
    assert [r.origin for r in cm.roots()] == ["path", "path", "project", "user", "bundled", "bundled"]
    named = [explicit.resolve(), env_dir.resolve()]
    assert cm.path_dirs() == [r.path for r in cm.roots() if r.origin == "path"] == named
    monkeypatch.setenv("AGENT_APPS_PATH", f"{env_dir}:{tmp_path / 'explicit' / '..' / 'explicit'}")
    assert cm.path_dirs() == named  # resolved, each once, in order
    other = tmp_path / "other"
    put(other, "d", "other")
    monkeypatch.setenv("AGENT_APPS_PATH", str(other))
    cm.get("a")  # the catalog is built: its directories are what a run records
    monkeypatch.setenv("AGENT_APPS_PATH", str(env_dir))
    assert cm.path_dirs() == [explicit.resolve(), other.resolve()]
    cm.reload()
    assert cm.path_dirs() == named
    assert cm.invoke_sync("a") == "explicit"
    assert cm.invoke_sync("b") == "env"
    assert cm.invoke_sync("c") == "project"
    assert cm.get("c").origin == "project"
    assert cm.get("skill-list").origin == "user"
    shadowed = {(e.skill.name, e.skill.description): e.shadowed_by for e in cm.catalog.entries}
    assert shadowed[("a", "explicit")] is None
    assert shadowed[("a", "env")].description == "explicit"
    bundled = next(e for e in cm.catalog.entries if e.skill.name == "skill-list" and e.skill.origin == "bundled")
    assert bundled.shadowed_by.origin == "user"
    assert shadowed[("c", "user")].origin == "project"


def test_nested_directories_and_folder_skills_are_found(tmp_path):
    root = tmp_path / "skills"
    put(root / "deep" / "er", "nested", "nested")
    (root / "docs" / "notes").mkdir(parents=True)
    (root / "docs" / "notes" / "SKILL.md").write_text("---\ndescription: Notes.\n---\nTake notes.\n")
    cm = ContextManager([root], cwd=tmp_path, env=False, project=False, user=False, entry_points=False, bundled=False)
    assert [s.name for s in cm.skills()] == ["nested", "notes"]


def test_plugin_hook_contributes_a_directory_that_shadows_bundled(tmp_path):
    pkg = tmp_path / "pkg"
    put(pkg, "skill-list", "from a package")

    class Plugin:
        __name__ = "my-plugin"

        @hookimpl
        def agent_apps_skill_dirs(self):
            return [pkg]

    cm = ContextManager([], cwd=tmp_path, plugins=[Plugin()], env=False, project=False, user=False, entry_points=False)
    skill = cm.get("skill-list")
    assert skill.origin.startswith("package:") and skill.description == "from a package"


def test_reload_sees_new_files(tmp_path):
    root = tmp_path / "skills"
    root.mkdir()
    cm = ContextManager([root], cwd=tmp_path, env=False, project=False, user=False, entry_points=False, bundled=False)
    assert cm.skills() == []
    put(root, "fresh", "new")
    cm.reload()
    assert [s.name for s in cm.skills()] == ["fresh"]


def _installed(site, dist, entry_points):
    """A distribution's metadata on ``site``, as an installer leaves it."""
    info = site / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(entry_points)


def test_broken_entry_point_package_is_reported_not_fatal(tmp_path, monkeypatch):
    _installed(tmp_path / "site", "broken-pkg", "[agent_apps.skills]\nbroken = frobnicate_not_installed.plugin\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    cm = ContextManager([], cwd=tmp_path, env=False, project=False, user=False)
    assert "skill-list" in [s.name for s in cm.skills()]
    assert any("broken-pkg" in str(e) and "frobnicate" in str(e) for e in cm.errors)


def test_entry_points_are_read_only_when_a_package_mentions_the_group(tmp_path, monkeypatch):
    """importlib.metadata is slow to import: the quick look decides whether it is needed."""
    from importlib.machinery import PathFinder

    from agent_apps.plugins import ENTRY_POINT_GROUP, _may_declare

    monkeypatch.setattr(sys, "meta_path", [PathFinder])  # a test run may have added others
    monkeypatch.setattr(sys, "path", [str(tmp_path / "site"), str(tmp_path / "missing")])
    _installed(tmp_path / "site", "other-pkg", "[console_scripts]\nother = other:main\n")
    assert not _may_declare(ENTRY_POINT_GROUP)
    _installed(tmp_path / "site", "skills-pkg", f"[{ENTRY_POINT_GROUP}]\nmine = mine.plugin\n")
    assert _may_declare(ENTRY_POINT_GROUP)
    (tmp_path / "eggs.zip").write_bytes(b"PK\x05\x06" + bytes(18))  # a zip on sys.path: cannot tell
    monkeypatch.setattr(sys, "path", [str(tmp_path / "eggs.zip")])
    assert _may_declare(ENTRY_POINT_GROUP)
    monkeypatch.setattr(sys, "path", [])

    class Finder:  # another source of distributions (importlib_metadata adds one): cannot tell either
        def find_distributions(self, context=None):
            return []

    monkeypatch.setattr(sys, "meta_path", [Finder(), PathFinder])
    assert _may_declare(ENTRY_POINT_GROUP)


def test_a_directory_on_the_path_twice_is_scanned_once(tmp_path):
    put(tmp_path / "skills", "only", "once")
    cm = ContextManager([tmp_path / "skills"], cwd=tmp_path, env=False, user=False, entry_points=False, bundled=False)
    assert [r.origin for r in cm.roots()] == ["path"]  # ./skills is the same directory
    assert cm.errors == [] and len(cm.catalog.entries) == 1
