"""Attachments: images and documents with the user's message, typed by their bytes,
capped, stored in the session, estimated in the token count, refused by a provider that
cannot take them, and given to sub-agents only as parts (never paths)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys

import pytest

from agent_apps import ArgsInvalid
from agent_apps.attachments import (
    MAX_ATTACHMENTS,
    MAX_DOCUMENT_BYTES,
    MAX_DOCUMENTS,
    MAX_IMAGE_BYTES,
    AttachmentInvalid,
    describe,
    load,
)
from agent_apps.state.messages import MEDIA_TOKENS, estimate_tokens

pytestmark = pytest.mark.anyio

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + bytes(40)
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF" + bytes(40)
GIF = b"GIF89a" + bytes(40)
WEBP = b"RIFF\x24\x00\x00\x00WEBPVP8 " + bytes(40)
PDF = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<<>>\nendobj\n"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


# -- what an attachment is ----------------------------------------------------------------


def test_the_bytes_decide_the_type_not_the_suffix(tmp_path):
    files = {"a.png": PNG, "photo.png": JPEG, "anim.gif": GIF, "b.webp": WEBP, "doc.pdf": PDF,
             "notes.md": b"# Notes\n\nhello\n", "notes.txt": "naïve text\n".encode(), "untitled": b"plain"}  # fmt: skip
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    parts = load(list(files), cwd=tmp_path)
    assert [(p["type"], p["format"], p["name"]) for p in parts] == [
        ("image", "png", "a.png"),
        ("image", "jpeg", "photo.png"),  # misnamed: its bytes are a JPEG's
        ("image", "gif", "anim.gif"),
        ("image", "webp", "b.webp"),
        ("document", "pdf", "doc.pdf"),
        ("document", "md", "notes.md"),
        ("document", "txt", "notes.txt"),
        ("document", "txt", "untitled"),
    ]
    assert base64.b64decode(parts[1]["data"]) == JPEG
    assert describe(parts[:1]) == [{"type": "image", "format": "png", "name": "a.png", "bytes": len(PNG)}]


@pytest.mark.parametrize(
    ("name", "data", "problem"),
    [
        ("report.pdf", b"just text, not a PDF", "its name says a PDF, but its bytes are not one"),
        ("photo.jpg", PNG[:4], "its name says a JPEG image, but its bytes are not one"),
        ("blob.bin", b"\x00\x01\x02\x03binary", "not an image (png, jpeg, gif, webp) or a document (pdf, txt, md)"),
        ("latin1.txt", "café".encode("latin-1"), "not an image"),
        ("empty.txt", b"", "it is empty"),
    ],
)
def test_what_is_not_an_attachment_is_refused_naming_the_file(tmp_path, name, data, problem):
    (tmp_path / name).write_bytes(data)
    with pytest.raises(AttachmentInvalid) as caught:
        load([name], cwd=tmp_path)
    assert problem in caught.value.problem and name in str(caught.value)
    assert caught.value.path == "attachments[0]"


def test_caps_on_size_count_and_documents(tmp_path):
    big = tmp_path / "big.png"
    big.write_bytes(PNG + bytes(MAX_IMAGE_BYTES))
    with pytest.raises(AttachmentInvalid, match=r"more than an image may be \(3.75 MB\)"):
        load([big])
    with pytest.raises(AttachmentInvalid, match=f"at most {MAX_ATTACHMENTS} attachments"):
        load([PNG] * (MAX_ATTACHMENTS + 1))
    with pytest.raises(AttachmentInvalid, match=f"at most {MAX_DOCUMENTS} documents"):
        load([b"text"] * (MAX_DOCUMENTS + 1))
    with pytest.raises(AttachmentInvalid, match="not a regular file"):
        load([tmp_path])
    with pytest.raises(AttachmentInvalid, match="a list"):
        load("one.png")  # type: ignore[arg-type]


def test_a_file_is_read_through_the_hosts_bounded_reader(tmp_path, monkeypatch):
    """A FIFO is refused without waiting for a writer, a credentials folder is never
    read, and a file over the larger cap is refused before it is read."""
    fifo = tmp_path / "pipe.png"
    os.mkfifo(fifo)
    with pytest.raises(AttachmentInvalid, match="FIFO, not a regular file") as caught:
        load([fifo])
    assert caught.value.path == "attachments[0]"
    ssh = tmp_path / "home" / ".ssh"
    ssh.mkdir(parents=True)
    (ssh / "id.txt").write_text("secret")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    with pytest.raises(AttachmentInvalid, match="inside denied path"):
        load([ssh / "id.txt"])
    huge = tmp_path / "huge.txt"
    huge.write_bytes(b"x" * (MAX_DOCUMENT_BYTES + 1))
    with pytest.raises(AttachmentInvalid, match=r"more than an attachment may be \(images 3.75 MB"):
        load([huge])


def test_parts_are_checked_like_files_and_paths_refused_where_files_are_not_allowed(tmp_path):
    (tmp_path / "a.png").write_bytes(PNG)
    assert load([{"type": "image", "format": "png", "data": b64(PNG)}], files=False)[0]["name"] == "attachment-1.png"
    assert load([{"format": "md", "data": b64(b"# x")}], files=False)[0]["format"] == "md"
    with pytest.raises(AttachmentInvalid, match="a path is not an attachment here"):
        load([str(tmp_path / "a.png")], files=False)
    with pytest.raises(AttachmentInvalid, match="its format says 'png' but its bytes are 'jpeg'"):
        load([{"format": "png", "data": b64(JPEG)}], files=False)
    with pytest.raises(AttachmentInvalid, match="not valid base64"):
        load([{"data": "!!!"}], files=False)
    with pytest.raises(AttachmentInvalid, match="not url"):
        load([{"data": b64(PNG), "url": "http://x"}], files=False)


def test_token_estimates_count_an_image_250_and_a_text_document_its_characters():
    image, doc = load([PNG, b"x" * 400])
    assert estimate_tokens({"role": "user", "text": "abcd", "media": [image]}) == 1 + MEDIA_TOKENS
    assert estimate_tokens({"role": "user", "text": "", "media": [doc]}) == 100


# -- through an agent run -------------------------------------------------------------------


def report(store, session):
    """The report of the (one) agent of the last run in ``session``."""
    run = store.runs.list(session=session)[0]
    return store.runs.agents(run.id)[0].report


def scripted(*turns, **extra):
    return {"agent": "agent-scripted", "script": list(turns), **extra}


async def test_attachments_reach_the_model_are_stored_and_counted(context_manager, tmp_path):
    (tmp_path / "chart.png").write_bytes(PNG)
    call = {"prompt": "P", "user_message": "What is in the chart?", "config": scripted({"text": "Bars."}, echo=True)}
    plain = await context_manager.invoke("agent", call, session="plain")
    assert plain == "Bars."
    got = await context_manager.invoke(
        "agent", call, session="s", attachments=[tmp_path / "chart.png", b"# Notes\n" + b"n" * 92]
    )
    assert got == "Bars."
    store = context_manager.state
    history = store.sessions.history("s")
    first = history.entries[0].message
    assert [(m["type"], m["format"], m["name"]) for m in first["media"]] == [
        ("image", "png", "chart.png"),
        ("document", "txt", "attachment-2.txt"),
    ]
    assert history.entries[0].tokens == estimate_tokens({"role": "user", "text": "What is in the chart?"}) + 250 + 25
    # the model's usage estimate (the scripted model's) counts them the same way
    with_media, without = report(store, "s"), report(store, "plain")
    assert with_media["usage"]["input_tokens"] - without["usage"]["input_tokens"] == 250 + 25
    assert with_media["attachments"] == [
        {"type": "image", "format": "png", "name": "chart.png", "bytes": len(PNG)},
        {"type": "document", "format": "txt", "name": "attachment-2.txt", "bytes": 100},
    ]


async def test_a_prompt_skill_takes_attachments_for_its_agent(context_manager, write_skill):
    write_skill("describe-image.skill.md", "---\ndescription: Describe an image.\nmetadata:\n  model:\n"
                "    agent: agent-scripted\n    script: [{text: A cat.}]\n---\nDescribe the image you are given.\n")
    assert await context_manager.invoke("describe-image", {}, attachments=[JPEG], session="p") == "A cat."
    first = context_manager.state.sessions.history("p").entries[0].message
    assert first["media"][0]["format"] == "jpeg"


async def test_a_provider_that_cannot_take_them_is_named(context_manager, write_skill):
    write_skill("plain-provider", 'frontmatter = {"params": {"type": "object", "properties": {"prompt": {}}}, '
                '"metadata": {"tags": ["meta-internal", "provider"], "visibility": "hidden"}}\n'
                "async def main(ctx, args):\n    return 'never'\n")
    for provider in ("plain-provider", "agent-acp"):
        with pytest.raises(ArgsInvalid) as caught:
            await context_manager.invoke(
                "agent", {"user_message": "x", "config": {"agent": provider}}, attachments=[PNG]
            )
        assert caught.value.path == "attachments" and f"provider {provider!r} cannot take attachments" in str(
            caught.value
        )


async def test_a_bad_attachment_is_refused_before_the_run_starts(context_manager):
    with pytest.raises(ArgsInvalid) as caught:
        await context_manager.invoke("agent", {"config": scripted({"text": "x"})}, attachments=[PNG, b"\x00bin"])
    assert caught.value.path == "attachments[1]"
    assert not context_manager.state.runs.list()  # nothing ran, nothing was recorded


async def test_agent_code_gives_a_sub_agent_parts_never_a_host_file(context_manager, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("the host's secret")
    inner = json.dumps(scripted({"text": "seen"}))
    by_path = (
        f'await ctx.manager.invoke("agent", {{"user_message": "x", "config": {inner}, '
        f'"attachments": [{str(secret)!r}]}})'
    )
    by_part = (
        f'r = await ctx.manager.invoke("agent", {{"user_message": "x", "config": {inner}, '
        f'"attachments": [{{"format": "txt", "data": "{b64(b"from the code")}"}}]}})\nctx.manager.finish(r)'
    )
    outer = scripted({"code": by_path}, {"code": by_part})
    got = await context_manager.invoke("agent", {"user_message": "go", "config": outer}, session="outer")
    assert got == "seen"
    history = context_manager.state.sessions.history("outer")
    refused = next(e.message for e in history.entries if e.message.get("role") == "tool")
    assert "invalid args at attachments[0]" in refused["text"]  # the agent skill's params take parts
    assert "the host's secret" not in json.dumps([e.message for e in history.entries])


def test_the_command_line_attaches_files_and_names_a_bad_one(tmp_path):
    (tmp_path / "pic.png").write_bytes(PNG)
    (tmp_path / "fake.pdf").write_text("not a pdf")
    base = [sys.executable, "-m", "agent_apps", "run", "describe it", "--config", "model.agent=agent-scripted",
            "--config", 'model.script:=[{"text": "A picture."}]', "-q"]  # fmt: skip

    def run(*extra):
        return subprocess.run([*base, *extra], cwd=tmp_path, capture_output=True, text=True, timeout=180)

    done = run("--attach", "pic.png", "--session", "cli")
    assert done.returncode == 0 and done.stdout.strip() == "A picture.", done.stderr
    shown = subprocess.run([sys.executable, "-m", "agent_apps", "sessions", "show", "cli", "--json"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=60)  # fmt: skip
    media = json.loads(shown.stdout)["messages"][0]["media"]
    assert [(m["format"], m["name"]) for m in media] == [("png", "pic.png")]
    bad = run("--attach", "pic.png", "--attach", "fake.pdf")
    assert bad.returncode == 2
    assert bad.stderr == "error: --attach fake.pdf: its name says a PDF, but its bytes are not one\n"
    missing = run("--attach", "nope.png")
    assert missing.returncode == 2 and missing.stderr.startswith("error: --attach nope.png: cannot read it")


async def test_a_resumed_run_has_its_attachments_and_an_import_brings_no_path(context_manager, write_skill):
    from agent_apps import ApprovalPending
    from agent_apps.state.errors import SnapshotInvalid
    from agent_apps.state.run_snapshot import check_imported

    from .test_durable import ASK_WRITE, COUNTER, TURNS, fresh

    write_skill("counter", COUNTER)
    call = {"prompt": "Test.", "user_message": "Write the note.", "config": scripted(*TURNS)}
    with pytest.raises(ApprovalPending) as info:
        await context_manager.invoke("agent", call, config=ASK_WRITE, attachments=[PNG])
    run_id = info.value.run_id
    invocation = context_manager.state.journal.checkpoint(run_id).invocation
    assert [p["format"] for p in invocation["attachments"]] == ["png"]

    other = fresh(context_manager)
    other.approve(run_id)
    assert await other.resume(run_id) == "Done."
    first, resumed = other.state.runs.agents(run_id)
    assert first.report["attachments"] == resumed.report["attachments"] == [
        {"type": "image", "format": "png", "name": "attachment-1.png", "bytes": len(PNG)}
    ]
    # a run file may bring parts, never a path to a file of the machine that imports it
    check_imported({k: v for k, v in invocation.items() if k in ("skill", "name", "args", "attachments")}, None)
    with pytest.raises(SnapshotInvalid, match="attachments are media parts"):
        check_imported({"skill": "agent", "attachments": ["/etc/passwd"]}, None)
