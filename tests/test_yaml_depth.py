"""The depth limit of the YAML agent-apps reads is ours: measured on the text, before
PyYAML (whose own limits change between releases: 6.0.4's C scanner stops at 1000 levels
with words of its own) reads a byte of it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from agent_apps import ConfigError, ContextManager
from agent_apps._yaml_depth import MAX_YAML_DEPTH, too_deep

REPO = Path(__file__).resolve().parent.parent


def _depth(value):
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


def _measured(text):
    """The depth :func:`too_deep` sees: the smallest limit it lets the text through."""
    return next(limit for limit in range(200) if too_deep(text, limit) is None)


#: shape -> a document of that shape nesting n levels (n >= 2)
SHAPES = {
    "flow sequence": lambda n: "m: " + "[" * (n - 1) + "]" * (n - 1),
    "flow mapping": lambda n: "m: " + "{a: " * (n - 1) + "1" + "}" * (n - 1),
    "compact block sequence": lambda n: "m:\n  " + "- " * (n - 1) + "x",
    "block mapping": lambda n: "".join(" " * i + f"k{i}:\n" for i in range(n - 1)) + " " * (n - 1) + "k: v",
    "sequence at its key's column": lambda n: "".join(
        f"{' ' * (2 * i)}{'- ' if i else ''}k:\n" for i in range((n + 1) // 2)
    ) + " " * (2 * ((n + 1) // 2 - 1)) + ("- x" if n % 2 == 0 else "  y: z"),
    "mixed, with anchors, tags and comments": lambda n: "a: &x !!seq  # [ [ [\n  - " + "{b: [" * ((n - 2) // 2)
    + "'[q'" + "]}" * ((n - 2) // 2) + ("" if n % 2 == 0 else "\n  - [z]"),
}

#: well-formed YAML whose text holds brackets, dashes and colons that are not structure
TRICKY = [
    "a: \"x [y {z\"\nb: 'don''t [z'\n",
    "a: don't [do] it\nb: x - y: z",
    "code: |\n  x = [[[[1]]]]\n  y = {\ndone: 1",
    "code: >-\n  [[[[\n- x\n",
    "a: # [[[ comment\n  b: 1",
    "a: b\n  [c] d\n\n  e\nf: [1]",
    "- x\n  [y] z\n- [1, [2]]",
    "a:\n- 1\nb:\n  c: 1",
    "a:  # x\n- - 1\n  - 2\n- 3",
    "a: [1,\n  [2,\n   [3]]]\nb: 2",
    "a: 'multi\n  [line'\nb: {c: [d]}",
    "url: http://example.com/[x]\nlist: [a-b, c:d]",
]


def _frontmatters():
    for path in sorted([*REPO.glob("**/*.skill.md"), *REPO.glob("**/SKILL.md")]):
        if ".venv" in path.parts:
            continue
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        end = next((i for i in range(1, len(lines)) if lines[i].rstrip() in ("---", "...")), None)
        if lines and lines[0].strip() == "---" and end:
            yield pytest.param("".join(lines[1:end]), id=str(path.relative_to(REPO)))


@pytest.mark.parametrize(
    "text",
    [
        *TRICKY,
        *(shape(n) for shape in SHAPES.values() for n in (2, 3, 8, 9)),
        *_frontmatters(),
    ],
)
def test_the_depth_read_from_the_text_is_the_depth_pyyaml_builds(text):
    try:
        expected = _depth(yaml.load(text, Loader=yaml.SafeLoader))
    except yaml.YAMLError:
        pytest.skip("not YAML (a frontmatter other tools accept, read leniently)")
    assert _measured(text) == expected


def _around_the_limit(shape):
    """The deepest document of ``shape`` within the limit, and the shallowest past it."""
    depths = {n: _depth(yaml.load(shape(n), Loader=yaml.SafeLoader)) for n in range(2, 3 * MAX_YAML_DEPTH)}
    within = max((n for n, depth in depths.items() if depth <= MAX_YAML_DEPTH), key=depths.__getitem__)
    past = min((n for n, depth in depths.items() if depth > MAX_YAML_DEPTH), key=depths.__getitem__)
    return shape(within), shape(past)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_frontmatter_too_deep_is_refused_before_pyyaml_reads_it(shape, skills_path, context_manager, monkeypatch):
    deepest, too = _around_the_limit(SHAPES[shape])
    read: list[str] = []
    for name in ("parse", "load", "compose", "safe_load"):
        real = getattr(yaml, name)
        monkeypatch.setattr(yaml, name, lambda text, *a, _real=real, **k: read.append(text) or _real(text, *a, **k))
    (skills_path / "deepest.skill.md").write_text(f"---\ndescription: x\n{deepest}\n---\nBody.\n")
    (skills_path / "too-deep.skill.md").write_text(f"---\ndescription: x\n{too}\n---\nBody.\n")
    (error,) = context_manager.errors
    assert error.path == str(skills_path / "too-deep.skill.md")
    assert str(error).endswith(f": the YAML frontmatter nests deeper than {MAX_YAML_DEPTH} levels")
    assert 3 <= error.line <= 3 + too.count("\n")  # the file line it passes the limit on
    assert read and not any(too in text for text in read)  # PyYAML read the other file only
    assert context_manager.get("deepest").description == "x"


#: the shapes whose text grows in step with their depth
LINEAR = ("flow sequence", "flow mapping", "compact block sequence")


@pytest.mark.parametrize("depth", [1000, 100_000])
def test_a_hundred_thousand_levels_give_the_same_one_line(depth, skills_path, context_manager):
    """PyYAML 6.0.4's C scanner stops a flow sequence 1000 deep itself, in words of its own."""
    for shape in LINEAR:
        (skills_path / f"{shape.replace(' ', '-')}.skill.md").write_text(
            f"---\ndescription: x\n{SHAPES[shape](depth)}\n---\nBody.\n"
        )
    messages = {str(error).split(": ", 1)[1] for error in context_manager.errors}
    assert len(context_manager.errors) == len(LINEAR)
    assert messages == {f"the YAML frontmatter nests deeper than {MAX_YAML_DEPTH} levels"}


def test_a_config_file_too_deep_is_a_config_error_not_a_crash(tmp_path):
    """Before: a project's agent-apps.yaml 100,000 levels deep was an internal RecursionError."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "agent-apps.yaml").write_text("model:\n  params: " + "[" * 100_000 + "]" * 100_000 + "\n")
    cm = ContextManager([], cwd=project, env=False, project=True, user=False, entry_points=False)
    with pytest.raises(ConfigError, match=rf"agent-apps.yaml:2: nests deeper than {MAX_YAML_DEPTH} levels$"):
        cm.config_for(None)
