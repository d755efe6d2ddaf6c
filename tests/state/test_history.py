"""Session history: token estimates and their anchor, fork, export and import, retention."""

from __future__ import annotations

import json

import pytest

from agent_apps.state import AlreadyExists, NotFound, SnapshotInvalid, StateStore, estimate_tokens
from agent_apps.state.messages import MEDIA_TOKENS

from .conftest import sibling


@pytest.fixture
def store(state_location):
    return StateStore(state_location)


def call(n):
    return {"id": f"c{n}", "name": "invoke", "input": {"code": "print(1)"}}


def turn(n):
    return [
        {"role": "user", "text": f"question {n}"},
        {"role": "assistant", "text": "Let me look.", "tool_calls": [call(n)]},
        {"role": "tool", "tool_call_id": f"c{n}", "name": "invoke", "text": "1", "error": False},
        {"role": "assistant", "text": f"answer {n}"},
    ]  # fmt: skip


def test_estimates_are_four_characters_a_token_plus_a_fixed_cost_per_image():
    assert estimate_tokens({"role": "user", "text": "x" * 40}) == 10
    assert estimate_tokens({"role": "user", "text": "x" * 41}) == 11
    image = {"type": "image", "format": "png", "data": "A" * 100_000}
    assert estimate_tokens({"role": "user", "text": "x" * 8, "media": [image, image]}) == 2 + 2 * MEDIA_TOKENS
    call = {"role": "assistant", "text": "", "tool_calls": [{"id": "1", "name": "invoke", "input": {"code": "ab"}}]}
    assert estimate_tokens(call) == -(-(len("invoke") + len('{"code": "ab"}')) // 4)


def test_attachments_and_reasoning_round_trip_on_each_backend(store, state_location):
    """A user message's media parts (base64, up to the attachment caps) and an assistant
    message's reasoning come back as they went in, through history, fork and export."""
    from agent_apps.attachments import MAX_IMAGE_BYTES, load

    png = b"\x89PNG\r\n\x1a\n" + bytes(MAX_IMAGE_BYTES - 8)
    media = load([png, "café ✓ notes\n".encode()])
    sent = [
        {"role": "user", "text": "look", "media": media},
        {"role": "assistant", "text": "A chart.", "reasoning": "The bytes say PNG. So an image."},
    ]
    store.sessions.append("s", sent)
    assert store.sessions.history("s").messages() == sent
    store.sessions.fork("s", "f")
    assert store.sessions.history("f").messages() == sent
    other = StateStore(sibling(state_location, "other"))
    other.sessions.import_(store.sessions.export("s"))
    assert other.sessions.history("s").messages() == sent
    assert store.sessions.history("s").entries[0].tokens == estimate_tokens(sent[0])


def test_the_total_is_anchored_to_the_last_reported_input_tokens(store):
    store.sessions.append("s", turn(1))
    history = store.sessions.history("s")
    estimated = sum(e.tokens for e in history.entries)
    assert history.estimated_tokens() == estimated  # no anchor yet: everything estimated
    # a provider reported 500 input tokens for the history before the last message
    store.sessions.append("s", turn(2), anchor=(500, 3))
    history = store.sessions.history("s")
    assert history.anchor_seq == 4 + 3
    after = sum(e.tokens for e in history.entries if e.seq > 7)
    assert history.estimated_tokens() == 500 + after  # re-estimated only after the anchor
    store.sessions.compact("s", through=4, summary="earlier: question 1")
    history = store.sessions.history("s")  # a compaction replaced what the anchor measured
    assert history.anchor_tokens is None
    assert history.messages()[0] == {"role": "summary", "text": "earlier: question 1"}
    assert [e.seq for e in history.entries] == [5, 6, 7, 8]


def test_fork_is_an_independent_copy(store):
    store.sessions.append("s", turn(1), memory={"n": 1})
    forked = store.sessions.fork("s", "f")
    assert forked.meta == {"forked_from": "s"} and forked.memory == {"n": 1} and forked.messages == 4
    store.sessions.append("f", turn(2), memory={"n": 2})
    assert store.sessions.get("s").messages == 4 and store.sessions.get("s").memory == {"n": 1}
    assert [e.message for e in store.sessions.messages("f")][:4] == [e.message for e in store.sessions.messages("s")]
    with pytest.raises(AlreadyExists):
        store.sessions.fork("s", "f")
    with pytest.raises(NotFound):
        store.sessions.fork("nope", "g")


def test_importing_an_export_gives_back_the_same_session(store, state_location):
    store.sessions.append("s", turn(1), memory={"k": [1, 2]}, run_id="r1", anchor=(90, 1))
    store.sessions.append("s", turn(2), run_id="r2")
    store.sessions.compact("s", through=4, summary="the first question was answered")
    exported = store.sessions.export("s")
    assert exported["format"] == "agent-apps/session" and exported["version"] == 1
    other = StateStore(sibling(state_location, "other"))
    other.sessions.import_(json.dumps(exported, indent=2))
    assert other.sessions.export("s") == exported
    assert other.sessions.history("s").messages() == store.sessions.history("s").messages()
    renamed = other.sessions.import_(exported, as_id="copy")
    assert renamed.id == "copy" and {**other.sessions.export("copy"), "id": "s"} == exported


def test_import_over_an_existing_session_is_refused(store):
    store.sessions.append("s", turn(1))
    with pytest.raises(AlreadyExists, match="--as"):
        store.sessions.import_(store.sessions.export("s"))
    assert store.sessions.get("s").messages == 4


@pytest.mark.parametrize(
    ("change", "needle", "field", "problem"),
    [
        (lambda d: d["messages"][2].update(role="bot"), '"role": "bot"', "messages[2].role", "'bot' is not one of"),
        (lambda d: d["messages"][1].pop("seq"), "{", "messages[1]", "'seq' is a required property"),
        (lambda d: d["messages"][3].update(seq=2), '"seq": 2', "messages[3].seq", "must increase"),
        (lambda d: d.update(version=7), '"version": 7', "version", "newer agent-apps"),
        (lambda d: d.update(format="other"), '"format": "other"', "format", "not an agent-apps session export"),
        (lambda d: d.update(id="bad id"), '"id": "bad id"', "id", "bad session id"),
        (lambda d: d.update(summary_through=99), '"summary_through": 99', "summary_through", "past the last"),
    ],
)
def test_a_bad_export_names_the_field_and_the_line(store, change, needle, field, problem):
    store.sessions.append("s", turn(1))
    data = store.sessions.export("s")
    store.sessions.remove("s")
    change(data)
    text = json.dumps(data, indent=2)
    with pytest.raises(SnapshotInvalid) as info:
        store.sessions.import_(text, source="s.json")
    error = info.value
    assert error.field == field and problem in str(error)
    assert str(error).startswith(f"s.json:{error.line}: {field}: ")
    assert needle in text.splitlines()[error.line - 1]  # the line of the offending value
    assert not store.sessions.exists("s")  # nothing written


def test_invalid_json_names_the_line(store):
    with pytest.raises(SnapshotInvalid, match=r"^s.json:3: not valid JSON"):
        store.sessions.import_('{\n  "format": "agent-apps/session",\n  oops\n}', source="s.json")


def test_forget_run_removes_what_a_run_added(store):
    store.sessions.append("s", turn(1), run_id="kept", memory={"v": 1})
    store.sessions.append("s", turn(2), run_id="gone", memory={"v": 2})
    store.sessions.forget_run("s", "gone", memory={"v": 1})
    info = store.sessions.get("s")
    assert [e.message["text"] for e in store.sessions.messages("s")][-1] == "answer 1"
    assert info.memory == {"v": 1} and info.tokens == sum(e.tokens for e in store.sessions.messages("s"))


def test_remove(store):
    store.sessions.append("s", turn(1))
    store.sessions.remove("s")
    assert not store.sessions.exists("s") and store.sessions.messages("s") == []
    with pytest.raises(NotFound, match="no session 's'"):
        store.sessions.remove("s")


def test_reset_guidance_forgets_the_loaded_skills_and_keeps_the_rest(store):
    store.sessions.append("s", turn(1), memory={"v": 1})
    store.sessions.update_meta("s", {"loaded_skills": ["code-review", "deploy"], "tag": "kept"})
    before = store.sessions.get("s")
    assert store.sessions.reset_guidance("s") == ["code-review", "deploy"]
    after = store.sessions.get("s")
    assert after.meta == {"tag": "kept"} and after.memory == {"v": 1} and after.messages == before.messages
    assert [e.message for e in store.sessions.messages("s")] == turn(1)
    assert store.sessions.reset_guidance("s") == []  # nothing left to forget
    with pytest.raises(NotFound, match="no session 'nope'"):
        store.sessions.reset_guidance("nope")


def test_loaded_guidance_is_added_each_name_once(store):
    store.sessions.append("s", turn(1))
    store.sessions.update_meta("s", {"tag": "kept"})
    store.sessions.add_loaded_guidance("s", ["code-review"])
    store.sessions.add_loaded_guidance("s", ["deploy", "code-review", "deploy"])
    assert store.sessions.get("s").meta == {"tag": "kept", "loaded_skills": ["code-review", "deploy"]}
    with pytest.raises(NotFound, match="no session 'nope'"):
        store.sessions.add_loaded_guidance("nope", ["deploy"])
