"""The console in a real browser, against real runs: the runs list and its filters, a
run turn by turn (code, calls, nested agents), live updates of a running agent, approve
and deny by clicking, and the token, Host and origin checks."""

from __future__ import annotations

import re
import threading

import pytest

from agent_apps import ApprovalPending

from .conftest import ASK_WRITE, BOUND, GATE, WRITE, invoke, scripted

expect = pytest.importorskip("playwright.sync_api").expect

WORD_COUNT = """
frontmatter = {
    "description": "Count the words in a text.",
    "params": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
}
async def main(ctx, args):
    return len(args["text"].split())
"""

#: Model output that is markup: the page must show it, never run it.
HOSTILE = '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script> & done'

DELEGATE = """\
n = await ctx.manager.invoke('agent', {'prompt': 'p', 'name': 'helper', 'config': %r})
try:
    await ctx.manager.invoke('file-read', {'path': '/nonexistent/secret.txt'})
except Exception as exc:
    print('refused')
print('helper says', n)"""


def test_the_runs_list_and_a_run_turn_by_turn(manager, write_skill, console, page):
    write_skill("word-count", WORD_COUNT)
    inner = scripted([{"text": "Inner here.", "code": "ctx.manager.finish(await ctx.manager.invoke('word-count', "
                                                       "{'text': 'x y z'}))"}])  # fmt: skip
    turns = [
        {"text": "Let me delegate.", "reasoning": "The helper counts.", "code": DELEGATE % (inner,),
         "usage": {"input_tokens": 1000, "output_tokens": 60}},
        {"text": HOSTILE, "usage": {"input_tokens": 1200, "output_tokens": 40}},
    ]  # fmt: skip
    config = scripted(turns, model_id="eu.claude-haiku-4-5")
    invoke(manager, "agent", {"prompt": "P", "name": "delegator", "user_message": "Count.", "config": config})
    chat = scripted([{"text": "Hello there."}])
    invoke(manager, "agent", {"prompt": "P", "name": "chatter", "config": chat}, session="s-1")

    page.goto(console.url)
    expect(page.get_by_role("heading", name="Runs")).to_be_visible()
    rows = page.get_by_role("table").get_by_role("row")
    expect(rows).to_have_count(3)  # the header and two runs
    expect(page.get_by_role("row", name=re.compile("delegator"))).to_contain_text("done")
    expect(page.get_by_role("row", name=re.compile("chatter"))).to_contain_text("s-1")
    # filters: by skill, then by what a model said
    page.get_by_label("Skill").select_option("chatter")
    page.get_by_role("button", name="Filter").click()
    expect(rows).to_have_count(2)
    expect(rows.nth(1)).to_contain_text("chatter")
    page.get_by_role("link", name="Clear").click()
    page.get_by_label("Text").fill("Let me delegate")
    page.get_by_role("button", name="Filter").click()
    expect(rows).to_have_count(2)
    rows.nth(1).get_by_role("link").click()

    expect(page.get_by_role("heading", name=re.compile(r"^Agent delegator"))).to_be_visible()
    # at $1 in / $5 out per million; the run's totals add the helper's
    expect(page.locator(".agent-head").first).to_contain_text("2,200 in / 100 out tokens · $0.0027")
    expect(page.locator("#run-head")).to_contain_text(re.compile(r"Tokens\s*2,\d{3} in / \d+ out"))
    first = page.get_by_role("article", name="Turn 1").first
    expect(first).to_contain_text("Let me delegate.")
    expect(first.get_by_label("Code").first).to_contain_text("await ctx.manager.invoke('agent'")
    expect(first.locator("pre.code .kw").first).to_have_text("await")  # highlighted
    calls = first.get_by_role("list", name="Calls").first
    expect(calls).to_contain_text("file-read")
    expect(calls).to_contain_text("/nonexistent/secret.txt")
    expect(calls).to_contain_text("PermissionDenied")
    expect(first.get_by_text("helper says 3")).to_be_visible()  # the result the model read
    # the agent the code started is shown inside the call that started it, with its own turns
    helper = first.get_by_role("heading", name=re.compile(r"^Agent helper"))
    expect(helper).to_be_visible()
    expect(first.get_by_role("article", name="Turn 1").first).to_contain_text("Inner here.")
    page.get_by_text("Reasoning").first.click()
    expect(page.get_by_text("The helper counts.")).to_be_visible()
    # model output is text on the page, never markup that runs
    second = page.get_by_role("article", name="Turn 2").first
    expect(second).to_contain_text(HOSTILE)
    assert page.evaluate("window.pwned") is None
    # the timeline has a row for each agent
    expect(page.get_by_role("img", name=re.compile(r"^delegator: "))).to_be_visible()
    expect(page.get_by_role("img", name=re.compile(r"^helper: "))).to_be_visible()

    page.get_by_role("link", name="Sessions").click()
    page.get_by_role("link", name="s-1").click()
    expect(page.get_by_text("Hello there.")).to_be_visible()


def test_a_running_agent_shows_live(manager, write_skill, console, page, tmp_path):
    write_skill("gate", GATE)
    gate = tmp_path / "open"
    page.goto(console.url)
    expect(page.get_by_text("No runs match.")).to_be_visible()
    page.evaluate("window.notReloaded = true")
    turns = [
        {"text": "Waiting at the gate.", "code": f"await ctx.manager.invoke('gate', {{'path': {str(gate)!r}}})"},
        {"text": "Through the gate."},
    ]
    call = {"prompt": "P", "name": "gatekeeper", "config": scripted(turns)}
    running = threading.Thread(target=manager.invoke_sync, args=("agent", call), daemon=True)
    running.start()
    try:
        row = page.get_by_role("row", name=re.compile("gatekeeper"))
        expect(row).to_contain_text("running")  # the list updates itself
        assert page.evaluate("window.notReloaded") is True
        row.get_by_role("link").click()
        page.evaluate("window.notReloaded = true")
        first = page.get_by_role("article", name="Turn 1")
        expect(first).to_contain_text("Waiting at the gate.")
        expect(first.get_by_label("Code")).to_contain_text("ctx.manager.invoke('gate'")
        expect(first.get_by_role("list", name="Calls")).to_contain_text("running")
        expect(page.locator("#run-head .status")).to_have_text("running")
        gate.touch()
        expect(page.get_by_role("article", name="Turn 2")).to_contain_text("Through the gate.")
        expect(first.get_by_role("list", name="Calls")).to_contain_text("ok")
        expect(page.locator("#run-head .status")).to_have_text("done")
        expect(page.locator(".agent-foot")).to_contain_text("Through the gate.")
        assert page.evaluate("window.notReloaded") is True  # all of it came live
    finally:
        gate.touch()
        running.join(BOUND)


def test_approve_and_deny_by_clicking(manager, console, page, tmp_path):
    def checkpointed(name, path):
        turns = [{"code": WRITE % str(path)}, {"text": f"{name} finished."}]
        with pytest.raises(ApprovalPending) as waiting:
            invoke(manager, "agent", {"prompt": "P", "name": name, "config": scripted(turns)}, config=ASK_WRITE)
        return waiting.value.run_id

    page.goto(console.url)
    page.get_by_role("link", name=re.compile("^Approvals")).click()
    expect(page.get_by_text("No run is waiting for approval.")).to_be_visible()
    wanted, unwanted = tmp_path / "wanted.txt", tmp_path / "unwanted.txt"
    approved = checkpointed("writer", wanted)
    denied = checkpointed("scribbler", unwanted)
    expect(page.get_by_role("listitem").filter(has_text=denied[:12])).to_be_visible()  # the list updates itself
    invoke(manager, "agent", {"prompt": "P", "name": "bystander", "config": scripted([{"text": "hi"}])})
    page.get_by_role("link", name="Runs").click()
    rows = page.get_by_role("table").get_by_role("row")
    expect(rows.nth(1)).to_contain_text("waiting-approval")  # waiting runs first
    expect(rows.nth(2)).to_contain_text("waiting-approval")
    expect(rows.nth(3)).to_contain_text("bystander")

    page.get_by_role("link", name=re.compile("^Approvals")).click()
    scribbler = page.get_by_role("listitem").filter(has_text=denied[:12])
    expect(scribbler).to_contain_text(str(unwanted))  # the pending call's args
    scribbler.get_by_label("Reason").fill("not in that folder")
    scribbler.get_by_role("button", name="Deny").click()
    expect(page).to_have_url(re.compile(f"/runs/{denied}$"))
    expect(page.locator("#run-head .status")).to_have_text("done")  # resumed, live
    expect(page.get_by_text("scribbler finished.").first).to_be_visible()
    expect(page.get_by_role("list", name="Calls").first).to_contain_text("not in that folder")
    assert not unwanted.exists()

    page.get_by_role("link", name=re.compile("^Approvals")).click()
    writer = page.get_by_role("listitem").filter(has_text=approved[:12])
    expect(writer).to_contain_text(str(wanted))
    writer.get_by_role("button", name="Approve").click()
    expect(page).to_have_url(re.compile(f"/runs/{approved}$"))
    expect(page.locator("#run-head .status")).to_have_text("done")
    expect(page.get_by_text("writer finished.").first).to_be_visible()
    assert wanted.read_text() == "hello\n"
    page.get_by_role("link", name=re.compile("^Approvals")).click()
    expect(page.get_by_text("No run is waiting for approval.")).to_be_visible()


def test_the_token_stays_in_a_cookie_scripts_cannot_read(manager, console, page):
    call = {"prompt": "P", "name": "secretive", "config": scripted([{"text": "the plans are in the vault"}])}
    invoke(manager, "agent", call)
    (run,) = manager.state.runs.list()
    # no token: nothing but how to get in
    page.goto(console.base + "/runs/" + run.id)
    expect(page.get_by_role("heading", name="This console needs its token")).to_be_visible()
    assert run.id not in page.content() and "vault" not in page.content()
    # the printed address lets the browser in, then leaves the address bar without the token
    page.goto(console.url)
    expect(page).to_have_url(console.base + "/")
    expect(page.get_by_role("row", name=re.compile("secretive"))).to_be_visible()
    assert page.evaluate("document.cookie") == ""
    (cookie,) = page.context.cookies()
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["value"] == console.token
    page.get_by_role("row", name=re.compile("secretive")).get_by_role("link").click()
    expect(page.get_by_text("the plans are in the vault").first).to_be_visible()
