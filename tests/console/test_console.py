"""The console in a real browser, against real runs: the runs list and its filters, a
run turn by turn (code, calls, nested agents), live updates of a running agent, approve
and deny by clicking, and the token, Host and origin checks."""

from __future__ import annotations

import asyncio
import re

import pytest

from agent_apps import ApprovalPending

from .conftest import ASK_WRITE, BOUND, GATE, WRITE, scripted

expect = pytest.importorskip("playwright.async_api").expect
pytestmark = pytest.mark.anyio

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


async def test_the_runs_list_and_a_run_turn_by_turn(manager, write_skill, console, page):
    write_skill("word-count", WORD_COUNT)
    inner = scripted([{"text": "Inner here.", "code": "ctx.manager.finish(await ctx.manager.invoke('word-count', "
                                                       "{'text': 'x y z'}))"}])  # fmt: skip
    turns = [
        {"text": "Let me delegate.", "reasoning": "The helper counts.", "code": DELEGATE % (inner,),
         "usage": {"input_tokens": 1000, "output_tokens": 60}},
        {"text": HOSTILE, "usage": {"input_tokens": 1200, "output_tokens": 40}},
    ]  # fmt: skip
    config = scripted(turns, model_id="eu.claude-haiku-4-5")
    await manager.invoke("agent", {"prompt": "P", "name": "delegator", "user_message": "Count.", "config": config})
    chat = scripted([{"text": "Hello there."}])
    await manager.invoke("agent", {"prompt": "P", "name": "chatter", "config": chat}, session="s-1")

    await page.goto(console.url)
    await expect(page.get_by_role("heading", name="Runs")).to_be_visible()
    rows = page.get_by_role("table").get_by_role("row")
    await expect(rows).to_have_count(3)  # the header and two runs
    await expect(page.get_by_role("row", name=re.compile("delegator"))).to_contain_text("done")
    await expect(page.get_by_role("row", name=re.compile("chatter"))).to_contain_text("s-1")
    # filters: by skill, then by what a model said
    await page.get_by_label("Skill").select_option("chatter")
    await page.get_by_role("button", name="Filter").click()
    await expect(rows).to_have_count(2)
    await expect(rows.nth(1)).to_contain_text("chatter")
    await page.get_by_role("link", name="Clear").click()
    await page.get_by_label("Text").fill("Let me delegate")
    await page.get_by_role("button", name="Filter").click()
    await expect(rows).to_have_count(2)
    await rows.nth(1).get_by_role("link").click()

    await expect(page.get_by_role("heading", name=re.compile(r"^Agent delegator"))).to_be_visible()
    # at $1 in / $5 out per million; the run's totals add the helper's
    await expect(page.locator(".agent-head").first).to_contain_text("2,200 in / 100 out tokens · $0.0027")
    await expect(page.locator("#run-head")).to_contain_text(re.compile(r"Tokens\s*2,\d{3} in / \d+ out"))
    first = page.get_by_role("article", name="Turn 1").first
    await expect(first).to_contain_text("Let me delegate.")
    await expect(first.get_by_label("Code").first).to_contain_text("await ctx.manager.invoke('agent'")
    await expect(first.locator("pre.code .kw").first).to_have_text("await")  # highlighted
    calls = first.get_by_role("list", name="Calls").first
    await expect(calls).to_contain_text("file-read")
    await expect(calls).to_contain_text("/nonexistent/secret.txt")
    await expect(calls).to_contain_text("PermissionDenied")
    await expect(first.get_by_text("helper says 3")).to_be_visible()  # the result the model read
    # the agent the code started is shown inside the call that started it, with its own turns
    helper = first.get_by_role("heading", name=re.compile(r"^Agent helper"))
    await expect(helper).to_be_visible()
    await expect(first.get_by_role("article", name="Turn 1").first).to_contain_text("Inner here.")
    await page.get_by_text("Reasoning").first.click()
    await expect(page.get_by_text("The helper counts.")).to_be_visible()
    # model output is text on the page, never markup that runs
    second = page.get_by_role("article", name="Turn 2").first
    await expect(second).to_contain_text(HOSTILE)
    assert await page.evaluate("window.pwned") is None
    # the timeline has a row for each agent
    await expect(page.get_by_role("img", name=re.compile(r"^delegator: "))).to_be_visible()
    await expect(page.get_by_role("img", name=re.compile(r"^helper: "))).to_be_visible()

    await page.get_by_role("link", name="Sessions").click()
    await page.get_by_role("link", name="s-1").click()
    await expect(page.get_by_text("Hello there.")).to_be_visible()


async def test_a_running_agent_shows_live(manager, write_skill, console, page, tmp_path):
    write_skill("gate", GATE)
    gate = tmp_path / "open"
    await page.goto(console.url)
    await expect(page.get_by_text("No runs match.")).to_be_visible()
    await page.evaluate("window.notReloaded = true")
    turns = [
        {"text": "Waiting at the gate.", "code": f"await ctx.manager.invoke('gate', {{'path': {str(gate)!r}}})"},
        {"text": "Through the gate."},
    ]
    call = {"prompt": "P", "name": "gatekeeper", "config": scripted(turns)}
    running = asyncio.ensure_future(manager.invoke("agent", call))
    try:
        row = page.get_by_role("row", name=re.compile("gatekeeper"))
        await expect(row).to_contain_text("running")  # the list updates itself
        assert await page.evaluate("window.notReloaded") is True
        await row.get_by_role("link").click()
        await page.evaluate("window.notReloaded = true")
        first = page.get_by_role("article", name="Turn 1")
        await expect(first).to_contain_text("Waiting at the gate.")
        await expect(first.get_by_label("Code")).to_contain_text("ctx.manager.invoke('gate'")
        await expect(first.get_by_role("list", name="Calls")).to_contain_text("running")
        await expect(page.locator("#run-head .status")).to_have_text("running")
        gate.touch()
        await expect(page.get_by_role("article", name="Turn 2")).to_contain_text("Through the gate.")
        await expect(first.get_by_role("list", name="Calls")).to_contain_text("ok")
        await expect(page.locator("#run-head .status")).to_have_text("done")
        await expect(page.locator(".agent-foot")).to_contain_text("Through the gate.")
        assert await page.evaluate("window.notReloaded") is True  # all of it came live
    finally:
        gate.touch()
        assert await asyncio.wait_for(running, BOUND) == "Through the gate."


async def test_approve_and_deny_by_clicking(manager, console, page, tmp_path):
    async def checkpointed(name, path):
        turns = [{"code": WRITE % str(path)}, {"text": f"{name} finished."}]
        with pytest.raises(ApprovalPending) as waiting:
            await manager.invoke("agent", {"prompt": "P", "name": name, "config": scripted(turns)}, config=ASK_WRITE)
        return waiting.value.run_id

    await page.goto(console.url)
    await page.get_by_role("link", name=re.compile("^Approvals")).click()
    await expect(page.get_by_text("No run is waiting for approval.")).to_be_visible()
    wanted, unwanted = tmp_path / "wanted.txt", tmp_path / "unwanted.txt"
    approved = await checkpointed("writer", wanted)
    denied = await checkpointed("scribbler", unwanted)
    await expect(page.get_by_role("listitem").filter(has_text=denied[:12])).to_be_visible()  # the list updates itself
    await manager.invoke("agent", {"prompt": "P", "name": "bystander", "config": scripted([{"text": "hi"}])})
    await page.get_by_role("link", name="Runs").click()
    rows = page.get_by_role("table").get_by_role("row")
    await expect(rows.nth(1)).to_contain_text("waiting-approval")  # waiting runs first
    await expect(rows.nth(2)).to_contain_text("waiting-approval")
    await expect(rows.nth(3)).to_contain_text("bystander")

    await page.get_by_role("link", name=re.compile("^Approvals")).click()
    scribbler = page.get_by_role("listitem").filter(has_text=denied[:12])
    await expect(scribbler).to_contain_text(str(unwanted))  # the pending call's args
    await scribbler.get_by_label("Reason").fill("not in that folder")
    await scribbler.get_by_role("button", name="Deny").click()
    await expect(page).to_have_url(re.compile(f"/runs/{denied}$"))
    await expect(page.locator("#run-head .status")).to_have_text("done")  # resumed, live
    await expect(page.get_by_text("scribbler finished.").first).to_be_visible()
    await expect(page.get_by_role("list", name="Calls").first).to_contain_text("not in that folder")
    assert not unwanted.exists()

    await page.get_by_role("link", name=re.compile("^Approvals")).click()
    writer = page.get_by_role("listitem").filter(has_text=approved[:12])
    await expect(writer).to_contain_text(str(wanted))
    await writer.get_by_role("button", name="Approve").click()
    await expect(page).to_have_url(re.compile(f"/runs/{approved}$"))
    await expect(page.locator("#run-head .status")).to_have_text("done")
    await expect(page.get_by_text("writer finished.").first).to_be_visible()
    assert wanted.read_text() == "hello\n"
    await page.get_by_role("link", name=re.compile("^Approvals")).click()
    await expect(page.get_by_text("No run is waiting for approval.")).to_be_visible()


async def test_the_token_stays_in_a_cookie_scripts_cannot_read(manager, console, page):
    call = {"prompt": "P", "name": "secretive", "config": scripted([{"text": "the plans are in the vault"}])}
    await manager.invoke("agent", call)
    (run,) = manager.state.runs.list()
    # no token: nothing but how to get in
    await page.goto(console.base + "/runs/" + run.id)
    await expect(page.get_by_role("heading", name="This console needs its token")).to_be_visible()
    assert run.id not in (await page.content()) and "vault" not in (await page.content())
    # the printed address lets the browser in, then leaves the address bar without the token
    await page.goto(console.url)
    await expect(page).to_have_url(console.base + "/")
    await expect(page.get_by_role("row", name=re.compile("secretive"))).to_be_visible()
    assert await page.evaluate("document.cookie") == ""
    (cookie,) = await page.context.cookies()
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["value"] == console.token
    await page.get_by_role("row", name=re.compile("secretive")).get_by_role("link").click()
    await expect(page.get_by_text("the plans are in the vault").first).to_be_visible()
