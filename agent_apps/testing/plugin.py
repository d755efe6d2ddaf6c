"""pytest fixtures for testing skills (registered as the ``agent_apps`` pytest plugin).

::

    def test_word_count(write_skill, context_manager):
        write_skill("word-count", '''
            frontmatter = {"params": {"type": "object", "properties": {"text": {"type": "string"}}}}
            async def main(ctx, args):
                return len(args["text"].split())
        ''')
        assert context_manager.invoke_sync("word-count", {"text": "a b"}) == 2

The manager these fixtures build is hermetic: it sees the test's skills directory and
the bundled skills, never the user's home, the working directory or other packages.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from agent_apps.manager import ContextManager

WriteSkill = Callable[..., Path]


@pytest.fixture
def skills_path(tmp_path: Path) -> Path:
    """An empty directory on the test manager's search path."""
    path = tmp_path / "skills"
    path.mkdir()
    return path


@pytest.fixture
def write_skill(skills_path: Path) -> WriteSkill:
    """``write_skill(name, source)`` writes ``NAME.skill.py`` (dedented) into
    :func:`skills_path`. A name ending in ``.md`` or ``/SKILL.md`` writes a prompt
    skill; ``directory=`` writes elsewhere. Returns the file's path."""

    def write(name: str, source: str, *, directory: Path | None = None) -> Path:
        filename = name if name.endswith((".py", ".md")) else f"{name}.skill.py"
        path = (directory or skills_path) / filename
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source).lstrip("\n"), encoding="utf-8")
        return path

    return write


@pytest.fixture
def context_manager(skills_path: Path, tmp_path: Path) -> ContextManager:
    """A hermetic ContextManager over :func:`skills_path` plus the bundled skills."""
    return hermetic_manager([skills_path], tmp_path)


def hermetic_manager(
    search_path: Sequence[Path], tmp_path: Path, plugins: Sequence[object] = (), **options: Any
) -> ContextManager:
    """A ContextManager that sees ``search_path``, ``plugins`` and the bundled skills, and
    nothing of the user's home, the working directory, the environment or other installed
    packages; ``options`` go to it (e.g. ``middleware=[...]``)."""
    return ContextManager(
        search_path=search_path,
        plugins=plugins,
        cwd=tmp_path,
        home=tmp_path / "agent-apps-home",
        env=False,
        project=False,
        user=False,
        entry_points=False,
        **options,
    )
