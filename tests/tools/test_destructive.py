"""Destructive shell lines raise a ``shell`` call to the ``admin`` category (seed 002:
bash destructive is admin): the policy asks a human about them interactively and
refuses them unattended, while ordinary lines stay ``write`` calls. The line is read as
the shell reads it (quotes, escapes, ``&&``, ``;``, pipes, comments, substitutions,
wrappers such as ``sudo``, ``env`` or ``xargs``, ``sh -c``)."""

from __future__ import annotations

import pytest
from tools_helpers import INTERACTIVE

from agent_apps.tools import PermissionDenied, approval
from agent_apps.tools.destructive import destructive

pytestmark = pytest.mark.anyio

EXISTING = {"notes.txt", "out.log", "sub/kept.txt"}


def exists(path: str) -> bool:
    return path in EXISTING


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("rm notes.txt", "'rm' removes files"),
        ("rm -rf build/", "'rm' removes files"),
        ('rm -- "my file.txt"', "'rm' removes files"),
        ("ls && rm x", "'rm' removes files: rm x"),
        ("make; rm -f a.o", "'rm' removes files: rm -f a.o"),
        ("false || rm x", "'rm' removes files: rm x"),
        ("ls\nrm x", "'rm' removes files: rm x"),
        ("(cd build && rm -r cache)", "'rm' removes files: rm -r cache"),
        ("\\rm x", "'rm' removes files"),
        ("'rm' x", "'rm' removes files"),
        ('"/bin/rm" x', "'rm' removes files"),
        ("FOO=1 BAR=2 rm x", "'rm' removes files"),
        ("env -i PATH=/bin rm x", "'rm' removes files"),
        ("sudo -u bob rm x", "'rm' removes files"),
        ("nohup nice -n 5 timeout 10 rm x", "'rm' removes files"),
        ("find . -name '*.tmp' | xargs rm", "'rm' removes files: xargs rm"),
        ("find . -name '*.o' -print0 | xargs -0 -n 10 rm -f", "'rm' removes files"),
        ("find . -name '*.tmp' -delete", "'find -delete' removes files"),
        ("find . -exec rm {} \\;", "'find -exec' runs a destructive command ('rm' removes files)"),
        ("echo $(rm x)", "'rm' removes files: rm x"),
        ('echo "result: $(rm -f x)"', "'rm' removes files: rm -f x"),
        ("echo `rm x`", "'rm' removes files: rm x"),
        ('bash -c "rm -rf build"', "'rm' removes files: bash -c"),
        ("sh -c 'git push -f'", "'git push --force' rewrites the remote's history"),
        ("eval rm x", "'rm' removes files"),
        ("unlink a", "'unlink' removes files"),
        ("shred -u key.pem", "'shred' removes files"),
        ("git push --force origin main", "'git push --force' rewrites the remote's history"),
        ("git push -f", "'git push --force' rewrites the remote's history"),
        ("git push --force-with-lease", "'git push --force' rewrites the remote's history"),
        ("git push origin +main:main", "'git push --force' rewrites the remote's history"),
        ("git -C repo push --force", "'git push --force' rewrites the remote's history"),
        ("git reset --hard HEAD~3", "'git reset --hard' throws away changes"),
        ("git clean -fdx", "'git clean -f' removes untracked files"),
        ("git branch -D feature", "'git branch -D' deletes a branch"),
        ("git branch --delete --force feature", "'git branch -D' deletes a branch"),
        ("git checkout -- .", "'git checkout --' throws away changes"),
        ("git restore src/app.py", "'git restore' throws away changes"),
        ("git stash clear", "'git stash clear' throws away stashed changes"),
        ("dd if=/dev/zero of=disk.img bs=1M count=10", "'dd of=' overwrites its output"),
        ("mkfs.ext4 disk.img", "'mkfs.ext4' formats a filesystem"),
        ("mkswap swapfile", "'mkswap' formats a filesystem"),
        ("chmod -R 755 .", "recursive 'chmod'"),
        ("chown --recursive bob: data", "recursive 'chown'"),
        ("truncate -s 0 app.log", "'truncate' cuts files"),
        ("echo hi > notes.txt", "overwrites the existing file 'notes.txt'"),
        ("echo hi >notes.txt", "overwrites the existing file 'notes.txt'"),
        ("echo hi >| notes.txt", "overwrites the existing file 'notes.txt'"),
        ("make > out.log 2>&1", "overwrites the existing file 'out.log'"),
        ("make &> out.log", "overwrites the existing file 'out.log'"),
        ("sort data > sub/kept.txt", "overwrites the existing file 'sub/kept.txt'"),
        ("echo x | tee notes.txt", "'tee' overwrites the existing file 'notes.txt'"),
        ("cp draft.txt notes.txt", "'cp' overwrites the existing file 'notes.txt'"),
        ("mv -f draft.txt notes.txt", "'mv' overwrites the existing file 'notes.txt'"),
    ],
)
def test_destructive_lines_say_why(line, why):
    found = destructive(line, exists)
    assert found is not None and why in found, found


@pytest.mark.parametrize(
    "line",
    [
        "ls -la",
        "rm",  # no operand: removes nothing (an error)
        'echo "rm -rf build"',
        "grep 'rm -rf' history.txt",
        "echo hi # rm -rf build",
        "git push origin main",
        "git reset --soft HEAD~1",
        "git clean -n",
        "git branch -d merged",
        "git restore --staged app.py",
        "git checkout main",
        "dd if=disk.img",  # to stdout
        "chmod 644 notes.txt",
        "echo hi >> notes.txt",
        "echo hi > new.txt",
        "make 2>/dev/null",
        'echo hi > "$OUT"',  # a variable: cannot be told
        "echo x | tee -a notes.txt",
        "cp -n draft.txt notes.txt",
        "cp a.txt b.txt",
        "mv old.txt new.txt",
        "ls | xargs echo",
        "timeout 5 ls",
        "find . -name '*.py' -exec grep -l TODO {} +",
        "bash -c 'echo hi'",
        "sed -i 's/a/b/' notes.txt",
    ],
)
def test_ordinary_lines_are_not_destructive(line):
    assert destructive(line, exists) is None


def test_reading_a_long_line_takes_linear_time():
    assert destructive("echo " + "a" * 200_000) is None
    assert destructive("ls; " * 20_000 + "rm x") == "'rm' removes files: rm x"


# -- the policy: ask, refuse unattended ------------------------------------------------------------


async def test_interactively_a_destructive_line_is_asked_as_an_admin_call(cm, workspace):
    (workspace / "notes.txt").write_text("keep me")
    asked: list[approval.ApprovalRequest] = []

    def human(request: approval.ApprovalRequest) -> bool | str:
        asked.append(request)
        return "not that one"

    with approval.session(human):
        result = await cm.invoke("shell", {"command": "ls notes.txt"}, config=INTERACTIVE)
        assert result["exit_code"] == 0 and asked == []  # an ordinary line: a write, allowed
        with pytest.raises(PermissionDenied, match="refused by the approver: not that one"):
            await cm.invoke("shell", {"command": "echo gone > notes.txt"}, config=INTERACTIVE)
    (request,) = asked
    assert request.category == "admin" and request.skill == "shell"
    assert request.rule == (
        "security.policy.interactive.categories.admin (a destructive shell line: overwrites the existing file "
        "'notes.txt': echo gone > notes.txt)"
    )
    assert (workspace / "notes.txt").read_text() == "keep me"
    with approval.session(lambda request: True):
        await cm.invoke("shell", {"command": "echo new > notes.txt"}, config=INTERACTIVE)
    assert (workspace / "notes.txt").read_text() == "new\n"


async def test_the_working_folder_of_the_call_decides_what_exists(cm, workspace):
    (workspace / "sub").mkdir()
    (workspace / "sub" / "data.txt").write_text("x")
    with approval.session(lambda request: "no"):
        await cm.invoke("shell", {"command": "echo y > data.txt"}, config=INTERACTIVE)  # no data.txt here
        with pytest.raises(PermissionDenied, match="'data.txt'"):
            await cm.invoke("shell", {"command": "echo y > data.txt", "cwd": "sub"}, config=INTERACTIVE)


async def test_unattended_a_destructive_line_is_refused_unless_the_job_lists_shell(cm, workspace):
    job = {"security": {"mode": "unattended", "policy": {"unattended": {"allow": ["shell"]}}}}
    strict = {"security": {"mode": "unattended", "policy": {"unattended": {"categories": {"write": "allow"}}}}}
    (workspace / "a.txt").write_text("x")
    assert (await cm.invoke("shell", {"command": "ls"}, config=strict))["exit_code"] == 0
    with pytest.raises(PermissionDenied, match="not permitted in unattended mode") as info:
        await cm.invoke("shell", {"command": "ls || rm a.txt"}, config=strict)
    assert "a destructive shell line: 'rm' removes files: rm a.txt" in info.value.rule
    assert (workspace / "a.txt").exists()
    # a job that lists shell by name has chosen: the name decides, as for any skill
    await cm.invoke("shell", {"command": "rm a.txt"}, config=job)
    assert not (workspace / "a.txt").exists()


async def test_a_line_the_blocklist_refuses_is_refused_without_asking(cm):
    asked = []
    with approval.session(lambda request: asked.append(request) or True):
        with pytest.raises(PermissionDenied, match="command refused"):
            await cm.invoke("shell", {"command": "rm -rf /"}, config=INTERACTIVE)
        with pytest.raises(PermissionDenied, match="'dd' onto a device is blocked"):
            await cm.invoke("shell", {"command": "dd if=/dev/zero of=/dev/sdb"}, config=INTERACTIVE)
    assert asked == []
