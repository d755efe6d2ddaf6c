"""The config cascade's order, layer against layer (docs/config.md): each layer beats
every one below it, for a value set in all of them, and ``middleware`` lists join in
the same order. One key per layer makes each boundary visible on its own: a key set in
the lowest layers only, up to a given one, must come from that one."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_apps import ContextManager

pytestmark = pytest.mark.anyio

#: Lowest first, as docs/config.md lists them (the defaults below them all).
LAYERS = ["user", "project", "outer-dir", "middle-dir", "skill-dir", "metadata", "call"]
#: One model key per layer: KEYS[i] is set in LAYERS[0..i], so LAYERS[i] must win it.
KEYS = ["max_turns", "max_steps", "max_retries", "context_keep", "max_tokens", "context_window", "tool_timeout"]


def model_of(layer: str) -> dict[str, int]:
    """What ``layer`` sets: every key from its own up, each to the layer's number."""
    index = LAYERS.index(layer)
    return {key: index + 1 for key in KEYS[index:]}


def yaml_of(layer: str) -> str:
    model = "".join(f"  {key}: {value}\n" for key, value in model_of(layer).items())
    return f"model:\n{model}middleware: [mw-{layer}]\n"


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Every layer's file, and decoys that must not count: a farther project file, a
    nearer pyproject.toml with no agent-apps table, a file above the search-path root."""
    home = tmp_path / "home"
    work = tmp_path / "work"
    cwd = work / "project" / "sub"
    root = tmp_path / "lib" / "skills"
    skill_dir = root / "team" / "writer"
    for folder in (home, cwd, skill_dir):
        folder.mkdir(parents=True)
    monkeypatch.setenv("AGENT_APPS_HOME", str(home))
    files = {
        "user": home / "config.yaml",
        "project": work / "project" / "agent-apps.yaml",
        "outer-dir": root / "agent-apps.yaml",
        "middle-dir": root / "team" / "agent-apps.yaml",
        "skill-dir": skill_dir / "agent-apps.yaml",
    }
    for layer, path in files.items():
        path.write_text(yaml_of(layer))
    decoy = "model:\n" + "".join(f"  {key}: 99\n" for key in KEYS) + "middleware: [mw-decoy]\n"
    (work / "agent-apps.yaml").write_text(decoy)  # farther from cwd than the project's own
    (root.parent / "agent-apps.yaml").write_text(decoy)  # above the root the skill was found in
    (cwd / "pyproject.toml").write_text("[project]\nname = 'not-configured'\n")  # nearer, no table
    model = ", ".join(f'"{key}": {value}' for key, value in model_of("metadata").items())
    (skill_dir / "writer.skill.py").write_text(
        f'frontmatter = {{"metadata": {{"model": {{{model}}}, "middleware": ["mw-metadata"]}}}}\n'
        "async def main(ctx, args):\n    return ctx.manager.config()\n"
    )
    files["metadata"] = skill_dir / "writer.skill.py"
    (root / "mw").mkdir()
    for layer in LAYERS:  # pass-through middleware, so the lists name real ones
        (root / "mw" / f"mw-{layer}.skill.py").write_text(
            'frontmatter = {"metadata": {"role": "middleware"}}\n'
            "async def main(ctx, args):\n    return await ctx.manager.next()\n"
        )
    return {**files, "cwd": cwd, "root": root}


def manager(tree: dict[str, Path]) -> ContextManager:
    return ContextManager([tree["root"]], cwd=tree["cwd"], env=False, entry_points=False)


def test_each_layer_beats_every_layer_below_it(tree):
    resolved = manager(tree).config_for("writer", {"model": model_of("call"), "middleware": ["mw-call"]})
    model = resolved.values["model"]
    assert {key: model[key] for key in KEYS} == {key: i + 1 for i, key in enumerate(KEYS)}
    for key, layer in zip(KEYS, LAYERS, strict=True):
        source = resolved.sources[f"model.{key}"]
        if layer in ("metadata", "call"):
            assert source.startswith("writer metadata" if layer == "metadata" else "call"), (key, source)
        else:
            assert source == str(tree[layer]), (key, source)
    # lists join lowest first, so outer layers wrap inner ones; the decoys add nothing
    assert resolved.values["middleware"] == ["$agent", *(f"mw-{layer}" for layer in LAYERS)]


def test_without_the_call_the_skills_own_layers_hold(tree):
    model = manager(tree).invoke_sync("writer")["model"]
    assert {key: model[key] for key in KEYS[:-1]} == {key: i + 1 for i, key in enumerate(KEYS[:-1])}
    assert model["tool_timeout"] == LAYERS.index("metadata") + 1


def test_a_layer_left_out_hands_its_keys_to_the_next_one_down(tree):
    """Take away the middle directory's file: its key falls to the outer one, not the
    skill's own directory (above it) and not the decoy above the root."""
    tree["middle-dir"].unlink()
    model = manager(tree).config_for("writer").values["model"]
    assert model["context_keep"] == LAYERS.index("outer-dir") + 1
    tree["outer-dir"].unlink()
    model = manager(tree).config_for("writer").values["model"]
    assert model["max_retries"] == model["context_keep"] == LAYERS.index("project") + 1  # never a decoy's 99


async def test_of_nested_calls_the_inner_one_wins(context_manager, write_skill):
    """invoke(..., config=) layers stack outermost first: the call nearest the skill wins."""
    write_skill(
        "teller.skill.md",
        "---\ndescription: Says what its script says.\nmetadata:\n  model:\n    agent: agent-scripted\n"
        "    script: [{text: from the metadata}]\n---\nSay it.\n",
    )
    write_skill(
        "runner",
        "frontmatter = {'params': {'type': 'object'}}\nasync def main(ctx, args):\n"
        "    inner = {'model': {'script': [{'text': 'from the inner call'}]}}\n"
        "    return await ctx.manager.invoke('teller', config=inner if args.get('inner') else None)\n",
    )
    outer = {"model": {"script": [{"text": "from the outer call"}]}}
    assert await context_manager.invoke("runner", {"inner": True}, config=outer) == "from the inner call"
    assert await context_manager.invoke("runner", {}, config=outer) == "from the outer call"
    assert await context_manager.invoke("runner", {}) == "from the metadata"


TELLER = (
    "---\ndescription: Says what its script says.\nmetadata:\n  model:\n    agent: agent-scripted\n"
    "    script: [{text: from the metadata}]\n---\nSay it.\n"
)


async def test_a_model_layer_above_an_agent_stops_at_it(context_manager, write_skill):
    """The call's ``model`` configures the agent below it, not the prompt skills that
    agent's code runs, however far above the agent the call was made."""
    write_skill("teller.skill.md", TELLER)
    write_skill(
        "runner",
        "frontmatter = {}\nasync def main(ctx, args):\n"
        "    return await ctx.manager.invoke('agent', {'prompt': 'p', 'allowed_tools': 'teller'})\n",
    )
    outer = {"model": {"agent": "agent-scripted",
                       "script": [{"code": "ctx.manager.finish(await ctx.manager.invoke('teller'))"}]}}
    assert await context_manager.invoke("runner", config=outer) == "from the metadata"


async def test_call_layers_merge_a_value_of_another_shape_by_replacing_it(context_manager, write_skill):
    """``admission.model_calls`` is a number or a mapping: an inner call's number replaces
    an outer call's mapping."""
    write_skill("teller.skill.md", TELLER)
    write_skill(
        "runner",
        "frontmatter = {}\nasync def main(ctx, args):\n"
        "    return await ctx.manager.invoke('teller', config={'admission': {'model_calls': 2}})\n",
    )
    outer = {"admission": {"model_calls": {"default": 4}}}
    assert await context_manager.invoke("runner", config=outer) == "from the metadata"


def test_a_file_that_is_both_project_and_directory_file_counts_once(tmp_path):
    skills = tmp_path / "skills"
    skills.mkdir()
    (skills / "agent-apps.yaml").write_text("middleware: [audit]\n")
    (skills / "writer.skill.py").write_text("frontmatter = {}\nasync def main(ctx, args):\n    return 1\n")
    cm = ContextManager([skills], cwd=skills, env=False, user=False, entry_points=False)
    resolved = cm.config_for("writer")
    assert resolved.values["middleware"] == ["$agent", "audit"]


async def test_a_skill_from_no_folder_has_no_directory_layer(context_manager):
    """Inline code has a path of sorts (``<inline:...>``) but no folder: it gets the
    layers above the directories and below the call."""
    source = "frontmatter = {}\nasync def main(ctx, args):\n    return ctx.manager.config()['model']['max_turns']\n"
    assert await context_manager.invoke(f"inline://{source}") == 30


def test_a_value_replacing_a_mapping_takes_its_place_and_its_source(tmp_path, monkeypatch):
    """``admission.model_calls`` is a number or a mapping: the project's number replaces
    the user's mapping, and the mapping's keys leave the listing of sources with it."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("AGENT_APPS_HOME", str(home))
    (home / "config.yaml").write_text("admission: {model_calls: {default: 4}}\n")
    (tmp_path / "agent-apps.yaml").write_text("admission: {model_calls: 2}\n")
    resolved = ContextManager([], cwd=tmp_path, env=False, entry_points=False).config_for(None)
    assert resolved.values["admission"]["model_calls"] == 2
    assert resolved.sources["admission.model_calls"] == str(tmp_path / "agent-apps.yaml")
    assert not [key for key in resolved.sources if key.startswith("admission.model_calls.")]


def test_every_value_a_layer_sets_has_that_layer_as_its_source(tmp_path):
    """Nested below a section no lower layer has, down to an empty mapping (a value too)."""
    text = "security:\n  policy:\n    allow: [file-read]\n    interactive: {categories: {}}\n"
    (tmp_path / "agent-apps.yaml").write_text(text)
    resolved = ContextManager([], cwd=tmp_path, env=False, user=False, entry_points=False).config_for(None)
    project = str(tmp_path / "agent-apps.yaml")
    assert {k: v for k, v in resolved.sources.items() if k.startswith("security.")} == {
        "security.policy.allow": project,
        "security.policy.interactive.categories": project,
    }


async def test_a_call_layer_reaches_every_depth_below_it_and_nothing_beside_it(context_manager, write_skill):
    """Whether a call layer is above an invocation is asked of its parent, once: a layer
    three invocations up still reaches the leaf, and a sibling tree without one has none."""
    from agent_apps.config import call_config

    seen = []
    write_skill(
        "leaf",
        "frontmatter = {'params': {'type': 'object'}}\nasync def main(ctx, args):\n    return None\n",
    )
    write_skill(
        "nest",
        "frontmatter = {'params': {'type': 'object'}}\nasync def main(ctx, args):\n"
        "    if args.get('n', 0) == 0:\n        return await ctx.manager.invoke('leaf')\n"
        "    return await ctx.manager.invoke('nest', {'n': args['n'] - 1})\n",
    )
    leaf = context_manager.get("leaf")
    leaf._cache["middleware"] = [lambda ctx, call_next: seen.append(call_config(ctx)) or call_next()]
    await context_manager.invoke("nest", {"n": 3}, config={"model": {"max_turns": 9}})
    await context_manager.invoke("nest", {"n": 3})
    assert seen == [{"model": {"max_turns": 9}}, None]
