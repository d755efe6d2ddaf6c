"""File tools and path boundaries: S6.1, S6.2, S6.10-S6.12, traversal, symlink escapes.

The path tests run in both modes: unattended runs (cron, CI, servers) get the same
filesystem limits and no elevation, even when their policy allows the write tools."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tools_helpers import INTERACTIVE, security

from agent_apps import AgentAppsError, ArgsInvalid
from agent_apps.tools import PermissionDenied
from agent_apps.tools.paths import scratch_dir

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["interactive", "unattended"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_write_read_list_edit_in_the_workspace(cm, workspace, mode):  # S6.1
    out = await cm.invoke("file-write", {"path": "notes/a.txt", "content": "one\ntwo\nthree\n"}, config=security(mode))
    assert out == {"path": str(workspace / "notes" / "a.txt"), "bytes": 14}
    assert await cm.invoke("file-read", {"path": "notes/a.txt"}, config=security(mode)) == "one\ntwo\nthree\n"
    assert (
        await cm.invoke("file-read", {"path": "notes/a.txt", "start_line": 2, "end_line": 2}, config=security(mode))
        == "two\n"
    )
    await cm.invoke("file-write", {"path": "notes/a.txt", "content": "four\n", "append": True}, config=security(mode))
    listing = await cm.invoke("file-list", {"recursive": True}, config=security(mode))
    assert listing["entries"] == [{"name": "notes", "type": "dir"}, {"name": "notes/a.txt", "type": "file", "size": 19}]
    edit = await cm.invoke(
        "file-edit", {"path": "notes/a.txt", "old_text": "two", "new_text": "TWO"}, config=security(mode)
    )
    assert edit["line"] == 2
    assert (workspace / "notes" / "a.txt").read_text() == "one\nTWO\nthree\nfour\n"


@pytest.mark.parametrize(
    ("skill", "args", "where"),
    [
        ("file-read", {}, "path"),
        ("file-read", {"path": 3}, "path"),
        ("file-read", {"path": "a", "start_line": 0}, "start_line"),
        ("file-write", {"path": "a"}, "content"),
        ("file-write", {"path": "a", "content": "x", "mode": "w"}, "mode"),
        ("file-edit", {"path": "a", "old_text": "", "new_text": "b"}, "old_text"),
        ("file-list", {"limit": 0}, "limit"),
        ("shell", {"command": ""}, "command"),
    ],
)
async def test_invalid_params_are_validation_errors(cm, skill, args, where):  # S6.2
    with pytest.raises(ArgsInvalid) as info:
        await cm.invoke(skill, args, config=INTERACTIVE)
    assert info.value.skill == skill and (info.value.path == where or where in info.value.message)


@pytest.mark.parametrize("how", ["absolute", "traversal", "deep-traversal", "home"])
async def test_read_outside_allowed_paths_is_denied(cm, workspace, outside, how, monkeypatch, mode):  # S6.10
    monkeypatch.setenv("HOME", str(outside))
    path = {
        "absolute": str(outside / "secret.txt"),
        "traversal": "../outside/secret.txt",
        "deep-traversal": "notes/../../outside/secret.txt",
        "home": "~/secret.txt",
    }[how]
    with pytest.raises(PermissionDenied) as info:
        await cm.invoke("file-read", {"path": path}, config=security(mode))
    assert info.value.rule == "security.allowed_paths"
    assert "outside the allowed paths" in str(info.value) and str(workspace) in str(info.value)


async def test_write_to_denied_path_inside_allowed_is_denied(cm, workspace, mode):  # S6.11
    (workspace / "private").mkdir()
    config = security(mode, denied_paths=["private", "*.pem"])
    for path in ("private/x.txt", "./private/../private/y.txt", "keys/server.pem"):
        with pytest.raises(PermissionDenied) as info:
            await cm.invoke("file-write", {"path": path, "content": "x"}, config=config)
        assert info.value.rule == "security.denied_paths"
    assert list((workspace / "private").iterdir()) == []
    assert not (workspace / "keys" / "server.pem").exists()
    # The same paths are fine without the denial.
    await cm.invoke("file-write", {"path": "private/x.txt", "content": "x"}, config=security(mode))


async def test_builtin_denied_paths_hold_even_when_home_is_allowed(cm, tmp_path, monkeypatch, mode):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("KEY")
    monkeypatch.setenv("HOME", str(home))
    with pytest.raises(PermissionDenied, match="denied path"):
        await cm.invoke("file-read", {"path": "~/.ssh/id_rsa"}, config=security(mode, allowed_paths=["~"]))
    listing = await cm.invoke("file-list", {"path": "~"}, config=security(mode, allowed_paths=["~"]))
    assert ".ssh" not in [e["name"] for e in listing["entries"]]


async def test_symlink_escapes_are_rejected(cm, workspace, outside, mode):  # S6.12
    (workspace / "link.txt").symlink_to(outside / "secret.txt")
    (workspace / "linkdir").symlink_to(outside)
    (workspace / "dangling").symlink_to(outside / "new.txt")
    for skill, args in [
        ("file-read", {"path": "link.txt"}),
        ("file-read", {"path": "linkdir/secret.txt"}),
        ("file-write", {"path": "link.txt", "content": "pwned"}),
        ("file-write", {"path": "linkdir/new.txt", "content": "pwned"}),
        ("file-write", {"path": "dangling", "content": "pwned"}),
        ("file-edit", {"path": "link.txt", "old_text": "top", "new_text": "pwned"}),
        ("file-list", {"path": "linkdir"}),
    ]:
        with pytest.raises(PermissionDenied, match="resolves to"):
            await cm.invoke(skill, args, config=security(mode))
    assert (outside / "secret.txt").read_text() == "top secret\n"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    listing = await cm.invoke("file-list", {}, config=security(mode))
    assert listing["entries"] == []  # links that lead out are not even shown


async def test_symlink_to_a_denied_path_inside_the_workspace_is_rejected(cm, workspace, mode):
    (workspace / "private").mkdir()
    (workspace / "private" / "k").write_text("k")
    (workspace / "innocent").symlink_to(workspace / "private" / "k")
    with pytest.raises(PermissionDenied, match="denied path"):
        await cm.invoke("file-read", {"path": "innocent"}, config=security(mode, denied_paths=["private"]))


async def test_symlink_inside_the_workspace_is_followed(cm, workspace, mode):
    (workspace / "real.txt").write_text("hello")
    (workspace / "alias.txt").symlink_to(workspace / "real.txt")
    assert await cm.invoke("file-read", {"path": "alias.txt"}, config=security(mode)) == "hello"


async def test_allowed_paths_replace_the_workspace_default(cm, workspace, outside, mode):
    config = security(mode, allowed_paths=[str(outside)])
    assert await cm.invoke("file-read", {"path": str(outside / "secret.txt")}, config=config) == "top secret\n"
    (workspace / "a").write_text("a")
    with pytest.raises(PermissionDenied):
        await cm.invoke("file-read", {"path": "a"}, config=config)


async def test_config_files_are_never_written(cm, workspace, mode):
    for name in ("agent-apps.yaml", "sub/tools.yaml"):
        with pytest.raises(PermissionDenied, match="agent-apps configuration"):
            await cm.invoke(
                "file-write", {"path": name, "content": "security: {mode: interactive}"}, config=security(mode)
            )


async def test_the_agent_apps_home_is_denied(cm, tmp_path, mode):
    home = tmp_path / "agent-apps-home"
    home.mkdir()
    with pytest.raises(PermissionDenied, match="denied path"):
        config = security(mode, allowed_paths=["/"])
        await cm.invoke("file-write", {"path": str(home / "config.yaml"), "content": "x"}, config=config)


@pytest.mark.parametrize("bad", ["", "a\x00b"])
async def test_bad_path_strings(cm, bad, mode):
    with pytest.raises((PermissionDenied, ArgsInvalid)):
        await cm.invoke("file-read", {"path": bad}, config=security(mode))


async def test_large_and_binary_files(cm, workspace):
    (workspace / "big.txt").write_text("x" * 5000)
    text = await cm.invoke("file-read", {"path": "big.txt"}, config=security(output_kb=1))
    assert text.startswith("x" * 1024) and "file truncated by agent-apps: showed 1024 of 5000 bytes" in text
    (workspace / "blob.bin").write_bytes(b"\x00\x01\x02")
    with pytest.raises(AgentAppsError, match="looks binary"):
        await cm.invoke("file-read", {"path": "blob.bin"}, config=INTERACTIVE)
    with pytest.raises(AgentAppsError, match="no such file"):
        await cm.invoke("file-read", {"path": "missing.txt"}, config=INTERACTIVE)


async def test_edit_needs_exactly_one_match(cm, workspace):
    target = workspace / "code.py"
    target.write_text("x = 1\nx = 1\n    y = 2\n")
    with pytest.raises(AgentAppsError, match="occurs 2 times") as info:
        await cm.invoke("file-edit", {"path": "code.py", "old_text": "x = 1", "new_text": "x = 3"}, config=INTERACTIVE)
    assert "unchanged" in str(info.value)
    with pytest.raises(AgentAppsError, match="not found.*whitespace"):
        await cm.invoke(
            "file-edit", {"path": "code.py", "old_text": "y  =  2", "new_text": "y = 3"}, config=INTERACTIVE
        )
    with pytest.raises(AgentAppsError, match="not found"):
        await cm.invoke("file-edit", {"path": "code.py", "old_text": "zzz", "new_text": ""}, config=INTERACTIVE)
    assert target.read_text() == "x = 1\nx = 1\n    y = 2\n"
    await cm.invoke(
        "file-edit", {"path": "code.py", "old_text": "x = 1\nx = 1", "new_text": "x = 1\nx = 2"}, config=INTERACTIVE
    )
    assert target.read_text() == "x = 1\nx = 2\n    y = 2\n"


async def test_list_filters_and_limits(cm, workspace):
    for name in ("a.py", "b.py", "c.txt"):
        (workspace / name).write_text("")
    listing = await cm.invoke("file-list", {"match": "*.py"}, config=INTERACTIVE)
    assert [e["name"] for e in listing["entries"]] == ["a.py", "b.py"]
    listing = await cm.invoke("file-list", {"limit": 2}, config=INTERACTIVE)
    assert len(listing["entries"]) == 2 and listing["truncated"] is True


async def test_scratch_directory_is_allowed_by_default(cm, mode):
    from agent_apps.tools.paths import scratch_dir

    path = scratch_dir() / f"test-{os.getpid()}.txt"
    try:
        await cm.invoke("file-write", {"path": str(path), "content": "ok"}, config=security(mode))
        assert Path(path).read_text() == "ok"
    finally:
        path.unlink(missing_ok=True)


async def test_unattended_runs_get_no_elevation(cm, workspace, outside, monkeypatch):
    """A scheduled run (no terminal, mode auto) is unattended: its policy may allow every
    tool, and an approver may say yes to everything, yet the paths stay as limited."""
    from agent_apps.tools import session

    monkeypatch.setattr("sys.stdin", None)  # cron: nothing attached
    job = {"security": {"mode": "auto", "policy": {"unattended": {"allow": ["*"]}}}}
    for skill, args in [
        ("file-read", {"path": str(outside / "secret.txt")}),
        ("file-write", {"path": "../outside/new.txt", "content": "pwned"}),
        ("file-edit", {"path": str(outside / "secret.txt"), "old_text": "top", "new_text": "pwned"}),
        ("file-list", {"path": str(outside)}),
    ]:
        with pytest.raises(PermissionDenied) as info:
            await cm.invoke(skill, args, config=job)
        assert info.value.rule == "security.allowed_paths", info.value
    asked = []
    ask = {"security": {"mode": "auto", "policy": {"unattended": {"ask": ["file-write"]}}}}
    with session(lambda request: asked.append(request.mode) or True):
        with pytest.raises(PermissionDenied, match="outside the allowed paths"):
            await cm.invoke("file-write", {"path": str(outside / "new.txt"), "content": "pwned"}, config=ask)
    assert asked == ["unattended"]  # the approver said yes to the tool, not to the path
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "top secret\n"
    # and without a job policy, an unattended run does not write at all
    with pytest.raises(PermissionDenied, match="not permitted in unattended mode"):
        await cm.invoke("file-write", {"path": "a.txt", "content": "x"}, config={"security": {"mode": "auto"}})


# -- a folder is not every name that starts like it ------------------------------------------


async def test_a_sibling_sharing_a_prefix_is_outside_an_allowed_root(cm, workspace, mode):
    evil = workspace.parent / (workspace.name + "-evil")
    evil.mkdir()
    (evil / "secret.txt").write_text("top secret\n")
    for skill, args in [
        ("file-read", {"path": str(evil / "secret.txt")}),
        ("file-read", {"path": f"../{evil.name}/secret.txt"}),
        ("file-write", {"path": str(evil / "new.txt"), "content": "pwned"}),
        ("file-list", {"path": str(evil)}),
    ]:
        with pytest.raises(PermissionDenied) as info:
            await cm.invoke(skill, args, config=security(mode))
        assert info.value.rule == "security.allowed_paths", (skill, args)
    assert sorted(p.name for p in evil.iterdir()) == ["secret.txt"]
    # the scratch directory's sibling likewise (checked before anything is opened)
    scratch_sibling = f"{scratch_dir()}-evil-{os.getpid()}/x.txt"
    with pytest.raises(PermissionDenied, match="outside the allowed paths"):
        await cm.invoke("file-read", {"path": scratch_sibling}, config=security(mode))


async def test_a_sibling_sharing_a_prefix_is_not_inside_a_denied_path(cm, workspace, tmp_path, monkeypatch, mode):
    home = tmp_path / "home"
    for folder in ("home/.ssh", "home/.ssh-public", "agent-apps-home-backup"):
        (tmp_path / folder).mkdir(parents=True)
    (workspace / "private").mkdir()
    (workspace / "private-notes").mkdir()
    (workspace / "private-notes" / "a.txt").write_text("fine\n")
    (home / ".ssh-public" / "key.pub").write_text("ssh-ed25519 AAAA\n")
    (tmp_path / "agent-apps-home-backup" / "b.txt").write_text("backup\n")
    monkeypatch.setenv("HOME", str(home))
    config = security(mode, denied_paths=["private"])
    assert await cm.invoke("file-read", {"path": "private-notes/a.txt"}, config=config) == "fine\n"
    listing = await cm.invoke("file-list", {}, config=config)
    assert [e["name"] for e in listing["entries"]] == ["private-notes"]  # the denied one is not shown
    with pytest.raises(PermissionDenied, match="denied path"):
        await cm.invoke("file-read", {"path": "private/x"}, config=config)
    # the built-in denials: ~/.ssh and the agent-apps home, not their look-alikes
    wide = security(mode, allowed_paths=[str(tmp_path)])
    assert await cm.invoke("file-read", {"path": "~/.ssh-public/key.pub"}, config=wide) == "ssh-ed25519 AAAA\n"
    backup = str(tmp_path / "agent-apps-home-backup" / "b.txt")
    assert await cm.invoke("file-read", {"path": backup}, config=wide) == "backup\n"
    with pytest.raises(PermissionDenied, match="denied path"):
        await cm.invoke("file-read", {"path": "~/.ssh/id_rsa"}, config=wide)
    # a denied glob covers what it matches and what is inside that, not its look-alikes
    (workspace / "keys").mkdir()
    (workspace / "keys-public").mkdir()
    (workspace / "keys-public" / "k.pub").write_text("pub\n")
    globbed = security(mode, denied_paths=["*/keys"])
    assert await cm.invoke("file-read", {"path": "keys-public/k.pub"}, config=globbed) == "pub\n"
    with pytest.raises(PermissionDenied, match="denied path"):
        await cm.invoke("file-write", {"path": "keys/k", "content": "x"}, config=globbed)


async def test_only_the_exact_config_names_are_protected(cm, workspace, mode):
    for name in ("agent-apps.yaml.bak", "my-tools.yaml", "tools.yaml.txt"):
        await cm.invoke("file-write", {"path": name, "content": "x"}, config=security(mode))
        assert (workspace / name).read_text() == "x"


#: docs/security.md, "Path boundaries": the built-in denied paths. A literal on purpose:
#: dropping one from the code fails the test below.
DOCUMENTED_DENIED = (
    "~/.ssh ~/.gnupg ~/.aws ~/.azure ~/.config/gcloud ~/.kube ~/.docker ~/.netrc ~/.git-credentials ~/.pypirc "
    "/etc/shadow /etc/gshadow /etc/sudoers /etc/passwd"
).split()


async def test_every_built_in_denied_path_holds_and_the_switch_lifts_them(cm, tmp_path, monkeypatch, mode):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    wide = security(mode, allowed_paths=["/"])
    for entry in DOCUMENTED_DENIED:
        for path in (entry, f"{entry}/inside"):
            with pytest.raises(PermissionDenied) as info:
                await cm.invoke("file-read", {"path": path}, config=wide)
            assert info.value.rule == "security.denied_paths" and "denied path" in str(info.value), path
    (home / ".netrc").write_text("machine example.com\n")
    lifted = security(mode, allowed_paths=["/"], builtin_denied_paths=False)
    assert await cm.invoke("file-read", {"path": "~/.netrc"}, config=lifted) == "machine example.com\n"


async def test_the_security_workspace_is_where_relative_paths_go_and_the_default_root(cm, workspace, tmp_path, mode):
    other = tmp_path / "other-workspace"
    other.mkdir()
    config = security(mode, workspace=str(other))
    out = await cm.invoke("file-write", {"path": "a.txt", "content": "here"}, config=config)
    assert out["path"] == str(other / "a.txt") and (other / "a.txt").read_text() == "here"
    assert not (workspace / "a.txt").exists()
    with pytest.raises(PermissionDenied, match="outside the allowed paths"):  # the old one is not allowed now
        await cm.invoke("file-read", {"path": str(workspace / "x")}, config=config)


async def test_no_allowed_paths_allow_nothing_and_say_so(cm, workspace, mode):
    (workspace / "a.txt").write_text("a")
    with pytest.raises(PermissionDenied, match=r"outside the allowed paths: \(none\)"):
        await cm.invoke("file-read", {"path": "a.txt"}, config=security(mode, allowed_paths=[]))


async def test_protected_config_names_are_still_readable(cm, workspace, mode):
    (workspace / "agent-apps.yaml").write_text("model: {}\n")
    assert await cm.invoke("file-read", {"path": "agent-apps.yaml"}, config=security(mode)) == "model: {}\n"


def test_a_path_policy_built_from_nothing_has_the_safe_defaults(tmp_path, monkeypatch):
    """``PathPolicy.from_security`` with no keys: the working directory is the workspace,
    the built-in denials hold, and bad paths are refused, not crashed on."""
    from agent_apps.tools.paths import PathPolicy

    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    agent_home = tmp_path / "agent-apps-home"
    policy = PathPolicy.from_security({}, cwd=tmp_path / "cwd", agent_home=agent_home)
    assert policy.check("t", "a.txt") == tmp_path / "cwd" / "a.txt"
    for path in ("~/.ssh/id_rsa", str(agent_home / "config.yaml")):
        with pytest.raises(PermissionDenied, match="denied path"):
            PathPolicy.from_security({"allowed_paths": ["/"]}, cwd=tmp_path, agent_home=agent_home).check("t", path)
    for bad in ("", 3, None, "a\x00b"):
        with pytest.raises(PermissionDenied, match="invalid path"):
            policy.check("t", bad)  # type: ignore[arg-type]
    # a readable folder lifts the home's denial only strictly inside the home
    at_home = PathPolicy.from_security({"allowed_paths": ["/"]}, cwd=tmp_path, agent_home=agent_home,
                                       readable=(str(agent_home),))
    with pytest.raises(PermissionDenied, match="denied path"):
        at_home.check("t", str(agent_home / "config.yaml"))
