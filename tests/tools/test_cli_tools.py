"""CLI tools from tools.yaml: S6.7-S6.9, S6.13, injection through every parameter,
optional args, errors that name the file and line."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from tools_helpers import INTERACTIVE, make_manager, security

from agent_apps import AgentAppsError, ArgsInvalid
from agent_apps.tools import PermissionDenied, ToolsPlugin

pytestmark = pytest.mark.anyio

SEED_TOOLS = """
tools:
  - name: kubectl_get
    description: "Get Kubernetes resources"
    category: read
    cmd: kubectl
    args: ["get", "{{resource}}"]
    optional_args:
      namespace: ["-n", "{{namespace}}"]
      selector: ["--selector={{selector}}"]
    parameters:
      resource:
        type: string
        enum: [pods, services, deployments, configmaps, secrets, nodes, namespaces]
        description: "The resource type"
      namespace:
        type: string
        description: "The Kubernetes namespace"
        pattern: "^[a-z0-9-]+$"
        maxLength: 63
        optional: true
      selector:
        type: string
        maxLength: 40
        optional: true

  - name: kubectl_apply
    description: "Apply a Kubernetes manifest"
    category: write
    cmd: kubectl
    args: ["apply", "-f", "{{file}}"]
    parameters:
      file:
        type: string
        description: "Path to the manifest file"
        pattern: "^[a-zA-Z0-9_./-]+$"

  - name: echo_text
    description: "Echo free text (no pattern: shows that argv keeps it literal)"
    category: read
    cmd: kubectl
    args: ["echo", "{{text}}", "{{count}}", "{{loud}}"]
    parameters:
      text: {type: string, maxLength: 500}
      count: {type: integer, minimum: 0}
      loud: {type: boolean}

  - name: get_all
    description: "kubectl get with an optional boolean flag"
    category: read
    cmd: kubectl
    args: ["get", "pods"]
    optional_args:
      watch: ["--watch"]
    parameters:
      watch: {type: boolean, optional: true}

  - name: deploy_app
    description: "Deploy"
    category: admin
    cmd: show-env
    env:
      DEPLOY_TOKEN: "${DEPLOY_TOKEN}"
    parameters: {}
"""


@pytest.fixture
def tools_file(tmp_path: Path) -> Path:
    path = tmp_path / "tools.yaml"
    path.write_text(SEED_TOOLS)
    return path


@pytest.fixture
def tcm(workspace, tmp_path, tools_file, fake_bin):
    return make_manager(workspace, tmp_path, plugins=[ToolsPlugin([tools_file])])


async def test_yaml_tools_are_skills(tcm, tools_file):  # S6.7
    skill = tcm.get("kubectl-get")
    assert skill.kind == "code" and skill.origin == f"tools.yaml:{tools_file}"
    assert skill.metadata["category"] == "read" and skill.where() == f"{tools_file}:3"
    assert skill.params["required"] == ["resource"]
    assert set(skill.params["properties"]) == {"resource", "namespace", "selector"}
    result = await tcm.invoke("kubectl-get", {"resource": "pods"}, config=INTERACTIVE)
    assert result["exit_code"] == 0 and json.loads(result["stdout"]) == ["get", "pods"]


async def test_optional_args_add_their_flags_only_when_given(tcm):
    out = await tcm.invoke("kubectl-get", {"resource": "pods", "namespace": "kube-system"}, config=INTERACTIVE)
    assert json.loads(out["stdout"]) == ["get", "pods", "-n", "kube-system"]
    out = await tcm.invoke("kubectl-get", {"resource": "nodes", "selector": "app=web"}, config=INTERACTIVE)
    assert json.loads(out["stdout"]) == ["get", "nodes", "--selector=app=web"]
    for watch, argv in ((True, ["get", "pods", "--watch"]), (False, ["get", "pods"])):
        out = await tcm.invoke("get-all", {"watch": watch}, config=INTERACTIVE)
        assert json.loads(out["stdout"]) == argv  # a false boolean adds no flag


NASTY = [
    "a; rm -rf ~",
    "$(touch pwned)",
    "`touch pwned`",
    "x | tee pwned",
    "x && touch pwned",
    "> pwned",
    "'\"\\",
    "*",
    "\n",
]


@pytest.mark.parametrize("text", NASTY)
async def test_metacharacters_stay_literal(tcm, workspace, text):  # S6.8
    out = await tcm.invoke("echo-text", {"text": text, "count": 2, "loud": True}, config=INTERACTIVE)
    assert json.loads(out["stdout"]) == ["echo", text, "2", "true"]
    assert not (workspace / "pwned").exists()


@pytest.mark.parametrize(
    ("args", "where"),
    [
        ({"resource": "pods; rm -rf ~"}, "resource"),  # S6.9
        ({"resource": "pods", "namespace": "default; rm -rf ~"}, "namespace"),
        ({"resource": "pods", "namespace": "$(id)"}, "namespace"),
        ({"resource": "pods", "namespace": "a" * 64}, "namespace"),
        ({"resource": "pods", "selector": "x" * 41}, "selector"),
        ({"resource": "pods", "extra": "--kubeconfig=/x"}, ""),
        ({"resource": ["pods"]}, "resource"),
        ({}, ""),
    ],
)
async def test_injection_through_any_parameter_is_rejected_by_validation(tcm, args, where):
    with pytest.raises(ArgsInvalid) as info:
        await tcm.invoke("kubectl-get", args, config=INTERACTIVE)
    assert info.value.path == where


@pytest.mark.parametrize("file", ["m.yaml; rm -rf ~", "$(id).yaml", "a b.yaml", "m.yaml\n", "`id`"])
async def test_injection_through_pattern_parameter(tcm, file):
    with pytest.raises(ArgsInvalid, match="kubectl-apply: invalid args at file: .* does not match"):
        await tcm.invoke("kubectl-apply", {"file": file}, config=INTERACTIVE)


@pytest.mark.parametrize(
    ("tool", "args", "where"),
    [
        ("kubectl-apply", {"file": "--dry-run"}, "file"),
        ("kubectl-get", {"resource": "pods", "selector": "--all-namespaces"}, "selector"),
        ("echo-text", {"text": "-rf", "count": 1, "loud": False}, "text"),
    ],
)
async def test_values_cannot_become_options(tcm, tool, args, where):
    with pytest.raises(ArgsInvalid, match="would be read as an option") as info:
        await tcm.invoke(tool, args, config=INTERACTIVE)
    assert info.value.path == where


async def test_allow_option_lets_a_parameter_start_with_a_dash(tmp_path, workspace, fake_bin):
    path = tmp_path / "t.yaml"
    path.write_text(
        textwrap.dedent("""
        tools:
          - name: grep-like
            category: read
            cmd: kubectl
            args: ["{{flag}}"]
            parameters:
              flag: {type: string, enum: ["-i", "-v"], allow_option: true}
    """)
    )
    cm = make_manager(workspace, tmp_path, plugins=[ToolsPlugin([path])])
    out = await cm.invoke("grep-like", {"flag": "-v"}, config=INTERACTIVE)
    assert json.loads(out["stdout"]) == ["-v"]


async def test_declared_env_is_passed_and_nothing_else(tcm, monkeypatch):  # S6.13 and S6.6
    monkeypatch.setenv("DEPLOY_TOKEN", "tok-123")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-must-not-leak")
    out = await tcm.invoke("deploy-app", {}, config=security(policy={"interactive": {"allow": ["deploy-app"]}}))
    env = json.loads(out["stdout"])
    assert env["DEPLOY_TOKEN"] == "tok-123"
    assert "GITHUB_TOKEN" not in env and "ghp-must-not-leak" not in out["stdout"]


async def test_a_cli_tools_environment_is_the_documented_allow_list_and_what_it_declares(tcm, monkeypatch):
    """No shell in between: the child's environment is exactly docs/security.md's list
    (a literal: widening the allow-list fails this), ``security.env`` and the tool's own."""
    documented = {"PATH", "HOME", "USER", "LANG", "LC_ALL", "TERM", "SHELL", "TMPDIR", "TZ"}
    for name in documented - {"PATH"}:
        monkeypatch.setenv(name, f"value-of-{name}")
    for name in ("DEPLOY_TOKEN", "BUILD_FLAVOUR", "SSH_AUTH_SOCK", "LD_PRELOAD", "PYTHONPATH", "LOGNAME", "LC_CTYPE"):
        monkeypatch.setenv(name, f"value-of-{name}")
    config = security(env=["BUILD_FLAVOUR"], policy={"interactive": {"allow": ["deploy-app"]}})
    env = json.loads((await tcm.invoke("deploy-app", {}, config=config))["stdout"])
    assert set(env) == documented | {"BUILD_FLAVOUR", "DEPLOY_TOKEN"}
    assert env["TZ"] == "value-of-TZ" and env["DEPLOY_TOKEN"] == "value-of-DEPLOY_TOKEN"


async def test_admin_tool_asks_in_interactive_mode(tcm):
    with pytest.raises(PermissionDenied, match="needs human approval"):
        await tcm.invoke("deploy-app", {}, config=INTERACTIVE)


async def test_tools_yaml_in_project_and_user_locations(workspace, tmp_path, fake_bin):
    (workspace / "tools.yaml").write_text(
        "tools:\n  - {name: proj-tool, category: read, cmd: kubectl, args: [project]}\n"
        "  - {name: both, category: read, cmd: kubectl, args: [from-project]}\n"
    )
    home = tmp_path / "agent-apps-home"
    home.mkdir()
    (home / "tools.yaml").write_text(
        "tools:\n  - {name: user-tool, category: read, cmd: kubectl, args: [user]}\n"
        "  - {name: both, category: read, cmd: kubectl, args: [from-user]}\n"
    )
    cm = make_manager(workspace, tmp_path, project=True, user=True)
    for name, argv in [("proj-tool", ["project"]), ("user-tool", ["user"]), ("both", ["from-project"])]:
        out = await cm.invoke(name, {}, config=INTERACTIVE)
        assert json.loads(out["stdout"]) == argv
    hermetic = make_manager(workspace, tmp_path)
    assert "proj-tool" not in {s.name for s in hermetic.skills()}


BROKEN = """\
tools:
  - name: good
    category: read
    cmd: kubectl
  - name: no-category
    cmd: kubectl
  - name: typo
    category: read
    cmd: kubectl
    argz: [x]
  - name: bad-ref
    category: read
    cmd: kubectl
    args: ["{{nope}}"]
  - name: bad-pattern
    category: read
    cmd: kubectl
    parameters:
      p:
        pattern: "(["
  - name: opt-in-args
    category: read
    cmd: kubectl
    args: ["{{o}}"]
    parameters:
      o: {optional: true}
  - name: Bad Name
    category: read
    cmd: kubectl
"""


def test_errors_name_the_file_and_line_and_the_rest_still_load(workspace, tmp_path):
    path = tmp_path / "tools.yaml"
    path.write_text(BROKEN)
    cm = make_manager(workspace, tmp_path, plugins=[ToolsPlugin([path])])
    assert "good" in {s.name for s in cm.skills()}
    messages = [str(e) for e in cm.errors]
    expected = [
        (5, "'category' must be one of read, write, admin"),
        (10, "unknown key 'argz' (did you mean 'args'?)"),
        (14, "no parameter 'nope'"),
        (20, "bad pattern"),
        (24, "optional parameter 'o'"),
        (27, "invalid skill name"),
    ]
    assert len(messages) == len(expected), messages
    for (line, words), message in zip(expected, messages, strict=True):
        assert message.startswith(f"{path}:{line}: ") and words in message, message


def test_bad_yaml_names_the_line(workspace, tmp_path):
    path = tmp_path / "tools.yaml"
    path.write_text("tools:\n  - name: x\n    args: [unclosed\n")
    cm = make_manager(workspace, tmp_path, plugins=[ToolsPlugin([path])])
    (error,) = cm.errors
    assert str(error).startswith(f"{path}:") and "bad YAML" in str(error)


def test_a_tools_file_too_deep_is_a_load_error_not_a_crash(workspace, tmp_path):
    path = tmp_path / "tools.yaml"
    path.write_text("tools:\n  - name: x\n    args: " + "[" * 100_000 + "]" * 100_000 + "\n")
    cm = make_manager(workspace, tmp_path, plugins=[ToolsPlugin([path])])
    (error,) = cm.errors
    assert str(error) == f"{path}:3: nests deeper than 64 levels"


async def test_missing_program_is_a_clear_error(workspace, tmp_path):
    path = tmp_path / "tools.yaml"
    path.write_text("tools:\n  - {name: ghost, category: read, cmd: no-such-program-xyz}\n")
    cm = make_manager(workspace, tmp_path, plugins=[ToolsPlugin([path])])
    with pytest.raises(AgentAppsError, match="'no-such-program-xyz' not found on PATH"):
        await cm.invoke("ghost", {}, config=INTERACTIVE)


async def test_tool_timeout_kills_it(workspace, tmp_path):
    path = tmp_path / "tools.yaml"
    path.write_text("tools:\n  - {name: hang, category: read, cmd: sleep, args: ['1000'], timeout: 0.5}\n")
    cm = make_manager(workspace, tmp_path, plugins=[ToolsPlugin([path])])
    with pytest.raises(AgentAppsError, match="hang: timed out after 0.5 s"):
        await cm.invoke("hang", {}, config=INTERACTIVE)


async def test_defaults_fill_template_positions(workspace, tmp_path, fake_bin):
    path = tmp_path / "t.yaml"
    path.write_text(
        "tools:\n  - name: tail\n    category: read\n    cmd: kubectl\n    args: ['-n', '{{count}}']\n"
        "    parameters:\n      count: {type: integer, minimum: 1, default: 20}\n"
    )
    cm = make_manager(workspace, tmp_path, plugins=[ToolsPlugin([path])])
    assert json.loads((await cm.invoke("tail", {}, config=INTERACTIVE))["stdout"]) == ["-n", "20"]
    assert json.loads((await cm.invoke("tail", {"count": 5}, config=INTERACTIVE))["stdout"]) == ["-n", "5"]
    with pytest.raises(ArgsInvalid):
        await cm.invoke("tail", {"count": "5; id"}, config=INTERACTIVE)


async def test_write_tool_is_denied_unattended_unless_listed(tcm):
    with pytest.raises(PermissionDenied, match="kubectl-apply: permission denied: not permitted in unattended mode"):
        await tcm.invoke("kubectl-apply", {"file": "m.yaml"}, config={"security": {"mode": "unattended"}})
    job = {"security": {"mode": "unattended", "policy": {"unattended": {"allow": ["kubectl-apply"]}}}}
    out = await tcm.invoke("kubectl-apply", {"file": "m.yaml"}, config=job)
    assert json.loads(out["stdout"]) == ["apply", "-f", "m.yaml"]
