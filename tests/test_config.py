"""The config cascade and where each value came from."""

from __future__ import annotations

import pytest

from agent_apps import ConfigError, ContextManager


def user_config(tmp_path, monkeypatch, text):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("AGENT_APPS_HOME", str(home))
    (home / "config.yaml").write_text(text)


def make(tmp_path, skills):
    return ContextManager([skills], cwd=tmp_path / "project", env=False, project=True, user=False, entry_points=False)


def test_layers_in_order_with_sources(tmp_path, monkeypatch):
    user_config(tmp_path, monkeypatch, "model:\n  model_id: user-model\n  temperature: 0.1\n  region: us-east-1\n")
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text('[tool.agent-apps.model]\nmodel_id = "project-model"\n')
    skills = tmp_path / "skills"
    sub = skills / "team"
    sub.mkdir(parents=True)
    (skills / "agent-apps.yaml").write_text("model:\n  temperature: 0.5\n  max_turns: 5\n")
    (sub / "agent-apps.yaml").write_text("model:\n  max_turns: 7\n")
    (sub / "writer.skill.py").write_text(
        'frontmatter = {"metadata": {"model": {"max_tokens": 100, "max_turns": 9}}}\n'
        'async def main(ctx, args):\n    return ctx.manager.config({"model": {"max_tokens": 5}})\n'
    )
    cm = make(tmp_path, skills)
    resolved = cm.config_for("writer", {"model": {"region": "eu-west-1"}})
    model = resolved.values["model"]
    assert model["agent"] == "agent-strands" and resolved.sources["model.agent"] == "defaults"
    assert model["model_id"] == "project-model"
    assert resolved.sources["model.model_id"].endswith("pyproject.toml [tool.agent-apps]")
    assert model["temperature"] == 0.5 and resolved.sources["model.temperature"] == str(skills / "agent-apps.yaml")
    assert model["max_turns"] == 9 and "writer metadata" in resolved.sources["model.max_turns"]
    assert model["region"] == "eu-west-1" and resolved.sources["model.region"] == "call"
    assert resolved.get("model.sandbox.timeout") == 30
    assert cm.invoke_sync("writer")["model"]["max_tokens"] == 5


def test_project_yaml_wins_over_pyproject_in_the_same_directory(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "agent-apps.yaml").write_text("model: {model_id: from-yaml}\n")
    (project / "pyproject.toml").write_text('[tool.agent-apps.model]\nmodel_id = "from-toml"\n')
    cm = make(tmp_path, tmp_path / "none")
    assert cm.config_for(None).values["model"]["model_id"] == "from-yaml"


def test_pyproject_is_read_once_per_change(tmp_path, monkeypatch):
    import os
    import tomllib

    project = tmp_path / "project"
    project.mkdir()
    pyproject = project / "pyproject.toml"
    pyproject.write_text('[tool.agent-apps.model]\nmodel_id = "first"\n')
    reads = []
    load = tomllib.loads
    monkeypatch.setattr(tomllib, "loads", lambda text: reads.append(text) or load(text))
    cm = make(tmp_path, tmp_path / "none")
    assert [cm.config_for(None).values["model"]["model_id"] for _ in range(3)] == ["first"] * 3
    assert len(reads) == 1
    pyproject.write_text('[tool.agent-apps.model]\nmodel_id = "second"\n')
    os.utime(pyproject, ns=(0, pyproject.stat().st_mtime_ns + 1))
    assert cm.config_for(None).values["model"]["model_id"] == "second" and len(reads) == 2


def test_the_merge_of_the_files_is_kept_until_one_changes_and_callers_get_their_own_copy(tmp_path, monkeypatch):
    import os

    from agent_apps import config

    skills = tmp_path / "skills"
    skills.mkdir()
    directory_file = skills / "agent-apps.yaml"
    directory_file.write_text("model: {temperature: 0.5, middleware: [timing]}\n")
    (skills / "writer.skill.py").write_text(
        'frontmatter = {"metadata": {"model": {"max_turns": 9}}}\nasync def main(ctx, args):\n    return 1\n'
    )
    cm = make(tmp_path, skills)
    merges = []  # the layers merged (the outermost call of each)
    merge = config._merge

    def counted(resolved, data, source, prefix, into):
        if not prefix:
            merges.append(source)
        merge(resolved, data, source, prefix, into)

    monkeypatch.setattr(config, "_merge", counted)
    first = cm.config_for("writer")
    made, middleware = len(merges), list(first.values["model"]["middleware"])
    assert middleware[-1] == "timing"
    first.values["model"]["temperature"] = 2.0  # a caller changing its copy changes nobody else's
    first.values["model"]["middleware"].append("audit")
    first.sources.clear()
    again = cm.config_for("writer", {"model": {"max_tokens": 5}})
    assert merges[made:] == ["call"]  # only the call layer was merged again
    assert again.values["model"]["temperature"] == 0.5 and again.values["model"]["middleware"] == middleware
    assert again.values["model"]["max_tokens"] == 5 and again.sources["model.max_tokens"] == "call"
    assert again.sources["model.max_turns"].startswith("writer metadata")
    assert "max_tokens" not in cm.config_for("writer").values["model"]  # a call layer is never kept
    directory_file.write_text("model: {temperature: 0.25}\n")
    os.utime(directory_file, ns=(0, directory_file.stat().st_mtime_ns + 1))
    changed = cm.config_for("writer")
    assert changed.values["model"]["temperature"] == 0.25 and changed.values["model"]["max_turns"] == 9
    (skills / "writer.skill.py").write_text(
        'frontmatter = {"metadata": {"model": {"max_turns": 3}}}\nasync def main(ctx, args):\n    return 1\n'
    )
    cm.reload()
    assert cm.config_for("writer").values["model"]["max_turns"] == 3  # a reloaded skill's new metadata


def test_middleware_lists_concatenate(tmp_path, monkeypatch):
    user_config(tmp_path, monkeypatch, "middleware: [audit]\n")
    project = tmp_path / "project"
    project.mkdir()
    (project / "agent-apps.yaml").write_text("middleware: [timing]\n")
    cm = ContextManager([], cwd=project, env=False, user=False, entry_points=False)
    resolved = cm.config_for(None)
    assert resolved.values["middleware"] == ["$agent", "audit", "timing"]  # "$agent": the bundled default
    assert " + " in resolved.sources["middleware"]


def test_bad_config_file_is_a_clear_error(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "agent-apps.yaml").write_text("model:\n  x: [1\n")
    cm = make(tmp_path, tmp_path / "none")
    with pytest.raises(ConfigError) as info:
        cm.config_for(None)
    assert str(info.value).startswith(f"{project / 'agent-apps.yaml'}:")
    (project / "agent-apps.yaml").write_text("- just a list\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        cm.config_for(None)


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("middleware: timing\n", 1, "middleware must be a list of strings, not 'timing'"),
        ("middleware: 5\n", 1, "middleware must be a list of strings, not 5"),
        ("model: 5\n", 1, "model must be a mapping, not 5"),
        ("model:\n  temperature: 0.2\n  max_turns: abc\n", 3, "model.max_turns must be an integer >= 0, not 'abc'"),
        (
            "security:\n  allowed_paths: /tmp/x\n",
            2,
            "security.allowed_paths must be a list of strings or null, not '/tmp/x'",
        ),
    ],
)
def test_known_keys_of_the_wrong_type_name_file_and_line(tmp_path, text, line, words):
    project = tmp_path / "project"
    project.mkdir()
    (project / "agent-apps.yaml").write_text(text)
    cm = make(tmp_path, tmp_path / "none")
    with pytest.raises(ConfigError) as info:
        cm.config_for(None)
    assert str(info.value) == f"{project / 'agent-apps.yaml'}:{line}: {words}"


# -- unknown keys ------------------------------------------------------------------------


def project_config(tmp_path, name, text):
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    (project / name).write_text(text)
    return project / name


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("modle:\n  max_turns: 3\n", 1, "unknown config key 'modle' (did you mean 'model'?)"),
        (
            "model:\n  temperature: 0.2\n  max_turn: 3\n",
            3,
            "unknown config key 'model.max_turn' (did you mean 'model.max_turns'?)",
        ),
        ("max_turns: 3\n", 1, "unknown config key 'max_turns' (did you mean 'model.max_turns'?)"),
        (
            "model:\n  sandbox: {timeout: 5, memory: 512}\n",
            2,
            "unknown config key 'model.sandbox.memory' (did you mean 'model.sandbox.memory_mb'?)",
        ),
        (
            "security:\n  http: {allow_privat: true}\n",
            2,
            "unknown config key 'security.http.allow_privat' (did you mean 'security.http.allow_private'?)",
        ),
        (
            "mcp_servers:\n  files:\n    comand: npx\n",
            3,
            "unknown config key 'mcp_servers.files.comand' (did you mean 'mcp_servers.files.command'?)",
        ),
        (
            "zzz: 1\n",
            1,
            "unknown config key 'zzz'; known keys here: "
            "admission, audit, mcp_servers, middleware, model, prices, security, state",
        ),
    ],
)
def test_unknown_keys_in_the_project_file_name_file_line_and_the_nearest_key(tmp_path, text, line, words):
    path = project_config(tmp_path, "agent-apps.yaml", text)
    cm = make(tmp_path, tmp_path / "none")
    with pytest.raises(ConfigError) as info:
        cm.config_for(None)
    assert str(info.value) == f"{path}:{line}: {words}"


def test_unknown_keys_in_pyproject_user_and_directory_files(tmp_path, monkeypatch):
    path = project_config(
        tmp_path, "pyproject.toml", '[project]\nname = "x"\n\n[tool.agent-apps.model]\nmodel_id = "m"\nmax_turn = 3\n'
    )
    cm = make(tmp_path, tmp_path / "none")
    with pytest.raises(
        ConfigError, match=r"unknown config key 'model.max_turn' \(did you mean 'model.max_turns'\?\)"
    ) as info:
        cm.config_for(None)
    assert str(info.value).startswith(f"{path}:6: ")
    path.write_text('[tool.agent-apps]\nmiddleware = []\nmodel = {agnt = "x"}\n')
    with pytest.raises(
        ConfigError, match=rf"^{path}:3: unknown config key 'model.agnt' \(did you mean 'model.agent'\?\)$"
    ):
        cm.config_for(None)
    path.unlink()

    user_config(tmp_path, monkeypatch, "model:\n  regoin: us-east-1\n")
    cm = ContextManager([], cwd=tmp_path, env=False, project=False, entry_points=False)
    with pytest.raises(
        ConfigError, match=r"config.yaml:2: unknown config key 'model.regoin' \(did you mean 'model.region'\?\)"
    ):
        cm.config_for(None)
    (tmp_path / "home" / "config.yaml").unlink()

    skills = tmp_path / "skills"
    (skills / "team").mkdir(parents=True)
    (skills / "team" / "agent-apps.yaml").write_text("middleware: []\nmodel:\n  max_stpes: 3\n")
    (skills / "team" / "x.skill.py").write_text("frontmatter = {}\nasync def main(ctx, args):\n    return 1\n")
    cm = make(tmp_path, skills)
    assert cm.config_for(None).values["middleware"] == ["$agent"]  # the directory file is not in this cascade
    with pytest.raises(ConfigError) as info:
        cm.invoke_sync("x")
    assert (
        str(info.value)
        == f"{skills / 'team' / 'agent-apps.yaml'}:3: "
        "unknown config key 'model.max_stpes' (did you mean 'model.max_steps'?)"
    )


def test_every_key_the_docs_and_providers_use_is_valid(tmp_path, monkeypatch):
    from agent_apps.mcp.client import MOUNTED_ENV

    monkeypatch.setenv(MOUNTED_ENV, "1")  # check the keys without starting the servers
    project_config(
        tmp_path,
        "agent-apps.yaml",
        """
model:
  agent: agent-strands
  provider: openai
  profile: p
  endpoint_url: http://x
  base_url: http://y
  api_key: k
  top_p: 0.9
  streaming: false
  read_timeout: 30
  connect_timeout: 5
  params: {anything: [1, 2]}
  script: [{text: hi}]
  stream: true
  context_edit: true
  context_keep: 4
  max_retries: 2
  retry_delay: 0.5
  sandbox: {timeout: 10, memory_mb: 128, output_kb: 8, max_calls: 5, max_payload_kb: 10, max_recursion: 100}
security:
  mode: unattended
  builtin_denied_paths: true
  http: {timeout: 5, max_kb: 10, allow_private: false}
  policy:
    allow: [a]
    unattended: {allow: [b], deny: [c], categories: {read: allow, custom: deny}}
mcp_servers:
  files: {command: npx, args: [-y], env: {A: b}, cwd: /tmp, timeout: 5, startup_timeout: 9, mode: legacy}
  web: {url: "http://x", headers: {H: v}}
middleware: []
""",
    )
    cm = make(tmp_path, tmp_path / "none")
    cm.config_for(None)  # no error
    assert cm.config_keys()[("model", "profile")] == "any value"  # declared by agent-strands


def test_call_time_config_and_the_agent_config_arg_are_checked(write_skill, context_manager):
    write_skill(
        "echo", "frontmatter = {}\nasync def main(ctx, args):\n    return ctx.manager.config()['model']['agent']\n"
    )
    with pytest.raises(
        ConfigError, match=r"^the call's config: unknown config key 'model.agnt' \(did you mean 'model.agent'\?\)$"
    ) as info:
        context_manager.invoke_sync("echo", config={"model": {"agnt": "x"}})
    assert info.value.call_error
    assert context_manager.invoke_sync("echo", config={"model": {"agent": "x"}}) == "x"  # the call is the top layer
    with pytest.raises(ConfigError, match=r"unknown config key 'model.max_turn' \(did you mean 'model.max_turns'\?\)"):
        context_manager.invoke_sync("agent", {"config": {"agent": "agent-scripted", "max_turn": 2}})


def test_metadata_config_sections_are_checked_other_metadata_is_free(write_skill, context_manager):
    write_skill(
        "free",
        'frontmatter = {\n    "metadata": {"mine": {"anything": 1}, "model": {"max_turns": 2}},\n}\n'
        "async def main(ctx, args):\n    return 1\n",
    )
    path = write_skill(
        "typo",
        'frontmatter = {\n    "description": "x",\n    "metadata": {"model": {"max_turn": 2}},\n}\n'
        "async def main(ctx, args):\n    return 1\n",
    )
    assert context_manager.invoke_sync("free") == 1
    with pytest.raises(ConfigError) as info:
        context_manager.invoke_sync("typo")
    assert (
        str(info.value) == f"{path}:3: metadata: unknown config key 'model.max_turn' (did you mean 'model.max_turns'?)"
    )


def test_packages_and_skills_declare_their_own_keys(tmp_path, skills_path, write_skill):
    from agent_apps import hookimpl

    class Notes:
        @hookimpl
        def agent_apps_config_keys(self):
            return {"notes.folder": "a string", "notes.extra": None}

    project = tmp_path / "project"
    project.mkdir()
    write_skill(
        "reader",
        'frontmatter = {"metadata": {"config_keys": ["reader.depth"]}}\n'
        'async def main(ctx, args):\n    return ctx.manager.config()["reader"]\n',
    )
    cm = ContextManager([skills_path], cwd=project, plugins=[Notes()], env=False, user=False, entry_points=False)
    (project / "agent-apps.yaml").write_text("notes: {folder: n, extra: [1]}\nreader: {depth: 3}\n")
    assert cm.invoke_sync("reader") == {"depth": 3}
    (project / "agent-apps.yaml").write_text("notes: {foldr: n}\n")
    with pytest.raises(
        ConfigError, match=r"agent-apps.yaml:1: unknown config key 'notes.foldr' \(did you mean 'notes.folder'\?\)"
    ):
        cm.config_for(None)
    (project / "agent-apps.yaml").write_text("notes:\n  folder: 3\n")
    with pytest.raises(ConfigError, match=r"agent-apps.yaml:2: notes.folder must be a string"):
        cm.config_for(None)


def test_a_bad_config_keys_declaration_is_a_clear_error(write_skill, context_manager):
    from agent_apps import SkillLoadError

    write_skill(
        "bad", 'frontmatter = {"metadata": {"config_keys": "model.x"}}\nasync def main(ctx, args):\n    return 1\n'
    )
    with pytest.raises(SkillLoadError, match="'metadata.config_keys' must be a list of dotted config keys"):
        context_manager.invoke_sync("bad")


# -- middleware lists ----------------------------------------------------------------------


def test_an_unknown_middleware_names_the_list_and_its_file(tmp_path, write_skill, skills_path):
    from agent_apps import SkillLoadError

    write_skill("target", "frontmatter = {}\nasync def main(ctx, args):\n    return 1\n")
    write_skill(
        "audit-ish",
        'frontmatter = {"metadata": {"role": "middleware"}}\n'
        "async def main(ctx, args):\n    return await ctx.manager.next()\n",
    )
    project = tmp_path / "project"
    project.mkdir()
    (project / "agent-apps.yaml").write_text("model: {}\nmiddleware: [audit-ihs]\n")
    cm = ContextManager([skills_path], cwd=project, env=False, user=False, entry_points=False)
    with pytest.raises(ConfigError) as info:
        cm.invoke_sync("target")
    assert str(info.value) == (
        f"{project / 'agent-apps.yaml'}:2: "
        "'middleware' list: no skill named 'audit-ihs' (did you mean audit-ish, audit?)"
    )
    (project / "agent-apps.yaml").write_text("middleware: [target]\n")
    cm.reload()
    with pytest.raises(
        ConfigError, match=r"agent-apps.yaml:1: 'middleware' list: .*'target' is used as middleware but lacks"
    ):
        cm.invoke_sync("target")
    (project / "agent-apps.yaml").unlink()
    path = write_skill(
        "framed",
        'frontmatter = {\n    "middleware": ["audit-ish", "timng"],\n}\nasync def main(ctx, args):\n    return 1\n',
    )
    cm.reload()
    with pytest.raises(SkillLoadError) as info:
        cm.invoke_sync("framed")
    assert str(info.value) == f"{path}:2: 'middleware' list of framed: no skill named 'timng'"


def test_a_code_skill_sees_the_call_layer_of_its_own_invocation_and_those_above(write_skill, context_manager):
    """Before: ``ctx.manager.config()`` left out the call's ``config=``, though the call is
    the cascade's top layer."""
    write_skill(
        "region",
        'frontmatter = {"metadata": {"model": {"region": "metadata"}}}\n'
        "async def main(ctx, args):\n"
        '    own = ctx.manager.config({"model": {"region": "arg"}})\n'
        '    return ctx.manager.config()["model"]["region"], own["model"]["region"]\n',
    )
    write_skill(
        "outer", 'frontmatter = {}\nasync def main(ctx, args):\n    return await ctx.manager.invoke("region")\n'
    )
    assert context_manager.invoke_sync("region") == ("metadata", "arg")
    call = {"model": {"region": "call"}}
    assert context_manager.invoke_sync("region", config=call) == ("call", "arg")
    assert context_manager.invoke_sync("outer", config=call) == ("call", "arg")  # a call's config holds below it


def test_a_config_copy_shares_nothing_mutable_at_any_depth_whatever_the_mappings_are():
    import types

    from agent_apps.config import _copied

    class Name(str):
        pass

    inner = {"list": [1, [2, {"x": 3}]], "name": Name("n"), "pair": (1, [2])}
    value = {"proxy": types.MappingProxyType({"inner": inner}), "flags": [True, None, 1.5]}
    copy = _copied(value)
    assert copy == {"proxy": {"inner": inner}, "flags": [True, None, 1.5]} and type(copy["proxy"]) is dict
    got = copy["proxy"]["inner"]
    got["list"][1][1]["x"] = 4
    got["list"][1].append(5)
    got["pair"][1].append(6)
    copy["flags"].append("more")
    assert inner == {"list": [1, [2, {"x": 3}]], "name": "n", "pair": (1, [2])}
    assert value["flags"] == [True, None, 1.5]
