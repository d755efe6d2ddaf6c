"""Packaging: a wheel carries the bundled skills; a skill package joins the search path.

Builds a real wheel, a real virtual environment and a real installed skill package.
The new environment borrows this one's dependencies through a ``.pth`` file, so the
test runs offline.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def run(*cmd, **kw):
    return subprocess.run([str(c) for c in cmd], check=True, capture_output=True, text=True, **kw)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    repo_root = Path(__file__).resolve().parent.parent
    out = tmp_path_factory.mktemp("dist")
    run(sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", out, repo_root)
    (built,) = out.glob("agent_apps-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(tmp_path_factory, wheel):
    root = tmp_path_factory.mktemp("venv")
    run(sys.executable, "-m", "venv", root)
    python = root / "bin" / "python"
    site = Path(run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())
    (site / "borrowed-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    run(python, "-m", "pip", "install", "--no-deps", "--no-index", wheel)
    return root


def test_wheel_contains_bundled_skills(wheel):
    import zipfile

    names = zipfile.ZipFile(wheel).namelist()
    assert "agent_apps/_bundled/skills/skill-list.skill.py" in names
    assert "agent_apps/py.typed" in names
    for asset in ("console.css", "console.js", "icon.svg"):  # the console's own, served from the package
        assert f"agent_apps/console/assets/{asset}" in names


def test_installed_wheel_finds_bundled_skills_and_a_skill_package_shadows_one(venv, tmp_path):
    python, cli = venv / "bin" / "python", venv / "bin" / "agent-apps"
    pkg = tmp_path / "tiny"
    (pkg / "tiny_skills" / "skills").mkdir(parents=True)
    (pkg / "pyproject.toml").write_text(
        textwrap.dedent(
            """
            [build-system]
            requires = ["hatchling"]
            build-backend = "hatchling.build"
            [project]
            name = "tiny-skills"
            version = "1.0"
            [project.entry-points."agent_apps.skills"]
            tiny = "tiny_skills"
            [tool.hatch.build.targets.wheel]
            packages = ["tiny_skills"]
            """
        )
    )
    (pkg / "tiny_skills" / "__init__.py").write_text(
        "from pathlib import Path\nfrom agent_apps import hookimpl\n\n"
        "@hookimpl\ndef agent_apps_skill_dirs():\n    return [Path(__file__).parent / 'skills']\n"
    )
    (pkg / "tiny_skills" / "skills" / "skill-list.skill.py").write_text(
        'frontmatter = {"description": "tiny shadow"}\nasync def main(ctx, args):\n    return "tiny"\n'
    )
    (pkg / "tiny_skills" / "skills" / "tiny-hello.skill.py").write_text(
        'frontmatter = {"description": "hello from tiny"}\nasync def main(ctx, args):\n    return "hello"\n'
    )
    run(python, "-m", "pip", "install", "--no-deps", "--no-index", "--no-build-isolation", pkg)

    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "AGENT_APPS_HOME": str(tmp_path / "home")}
    listing = json.loads(run(cli, "list", "--all", "--json", cwd=work, env=env).stdout)
    by = {(s["name"], s["origin"]): s for s in listing["skills"]}
    bundled = by[("skill-list", "bundled")]
    assert "/site-packages/agent_apps/_bundled/skills/" in bundled["path"]
    assert bundled["shadowed_by"] and "tiny_skills" in bundled["shadowed_by"]
    assert ("skill-describe", "bundled") in by
    assert by[("tiny-hello", "package:tiny-skills")]["shadowed_by"] is None
    assert run(cli, "invoke", "skill-list", cwd=work, env=env).stdout.strip() == "tiny"
    assert run(cli, "invoke", "tiny-hello", cwd=work, env=env).stdout.strip() == "hello"
