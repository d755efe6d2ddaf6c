"""Take the screenshots of docs/console.md: real runs in a new store, the console as a
real process, Chromium driven by Playwright (as the console's tests do).

    python docs/console/screenshots.py      # writes docs/console/*.png
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from agent_apps.scheduling.timing import When

from agent_apps import ApprovalPending, Cancelled, ContextManager

HERE = Path(__file__).resolve().parent
CHROMIUM = os.environ.get("AGENT_APPS_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]  # fmt: skip

NOTES = {
    "standup.md": "# Standup\n- shipped the exporter\n- blocked on review\n",
    "retro.md": "# Retro\n- deploys are slow\n- more pairing\n",
    "plan.md": "# Plan\n- cut the release on Friday\n",
}
SUMMARIZE = """\
summary = await ctx.manager.invoke('agent', {
    'name': 'summarizer',
    'prompt': 'Summarize a note in one line.',
    'user_message': text,
    'config': %r,
})"""
DIGEST = [
    {"reasoning": "List the folder first, then read each note.", "text": "Let me see which notes there are.",
     "usage": {"input_tokens": 1830, "output_tokens": 64},
     "code": "listing = await ctx.manager.invoke('file-list', {'path': 'notes'})\n"
             "names = [e['name'] for e in listing['entries'] if e['name'].endswith('.md')]\nprint(names)"},
    {"text": "Three notes. I read them together, and have the first one summarized.",
     "usage": {"input_tokens": 2210, "output_tokens": 131},
     "code": "import asyncio\n"
             "texts = await asyncio.gather(*(ctx.manager.invoke('file-read', {'path': f'notes/{n}'})\n"
             "                              for n in ['standup.md', 'retro.md', 'plan.md']))\n"
             "text = texts[0]\n" + SUMMARIZE % ({"agent": "agent-scripted", "model_id": "eu.claude-haiku-4-5",
                 "script": [{"text": "One line.", "code": "ctx.manager.finish('Exporter shipped; review blocks.')",
                             "usage": {"input_tokens": 610, "output_tokens": 22}}]},) + "\nprint(summary)"},
    {"text": "Done: the team shipped the exporter, deploys are slow, and the release is on Friday.",
     "usage": {"input_tokens": 2630, "output_tokens": 48}},
]  # fmt: skip
ASK_WRITE = {"security": {"mode": "unattended", "policy": {"unattended": {"ask": ["file-write"]}}}}


def make_store(root: Path) -> Path:
    """A store with the runs the pages show."""
    (root / "notes").mkdir()
    for name, text in NOTES.items():
        (root / "notes" / name).write_text(text)
    store_path = root / "state.db"
    cm = ContextManager(cwd=root, home=root / "home", state=str(store_path), env=False, project=False, user=False)
    model = {"agent": "agent-scripted", "model_id": "eu.claude-haiku-4-5"}
    digest = {"prompt": "You digest notes.", "name": "notes-digest", "user_message": "Digest the notes in ./notes.",
              "config": {**model, "script": DIGEST}}  # fmt: skip
    cm.invoke_sync("agent", digest)
    for question, answer in (("Where do we stand on the release?", "It is planned for Friday."),
                             ("What blocks it?", "The review of the exporter.")):  # fmt: skip
        call = {"prompt": "You answer.", "name": "assistant", "user_message": question,
                "config": {**model, "script": [{"text": answer}]}}  # fmt: skip
        cm.invoke_sync("agent", call, session="release-chat")
    read = "await ctx.manager.invoke('file-read', {'path': '/etc/shadow'})"
    failing = [{"text": "Reading the config.", "code": read},
               {"error": {"type": "ThrottlingException", "message": "Rate exceeded", "retryable": False}}]  # fmt: skip
    try:
        cm.invoke_sync("agent", {"prompt": "P", "name": "config-audit", "config": {**model, "script": failing}})
    except Exception:  # the run is recorded with its error, which is what the page shows
        pass
    write = [{"text": "I will save the digest.", "code": "await ctx.manager.invoke('file-write', "
              "{'path': 'digest.md', 'content': '# Digest\\n- exporter shipped\\n- release on Friday\\n'})"},
             {"text": "Saved."}]  # fmt: skip
    try:
        cm.invoke_sync("agent", {"prompt": "P", "name": "digest-writer", "config": {**model, "script": write}},
                       config=ASK_WRITE)  # fmt: skip
    except ApprovalPending:
        pass
    now = time.time()
    schedules = cm.state.schedules
    schedules.create(ref="notes-digest", args={"folder": "notes"}, when=When(cron="0 6 * * *"),
                               name="morning-digest", now=now - 3 * 86400)  # fmt: skip
    schedules.create(ref="config-audit", args={}, when=When(every=3600), name="hourly-audit", now=now)
    for claim in schedules.claim(now, limit=3, grace=60).claims:
        schedules.finish_run(claim, status="done", now=now)
    return store_path


def main() -> None:
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        store_path = make_store(root)
        env = {**os.environ, "AGENT_APPS_STATE": str(store_path)}
        console = subprocess.Popen([sys.executable, "-m", "agent_apps", "console", "--port", "0"], cwd=root,
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)  # fmt: skip
        try:
            url = re.search(r"http://\S+", console.stdout.readline()).group(0)  # type: ignore[union-attr]
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
                page = browser.new_page(viewport={"width": 1280, "height": 860}, device_scale_factor=1)
                page.goto(url)
                page.screenshot(path=HERE / "runs.png")
                page.get_by_role("row", name=re.compile("notes-digest")).last.get_by_role("link").click()
                page.get_by_text("Reasoning").first.click()
                page.screenshot(path=HERE / "run.png", full_page=True)
                page.get_by_role("link", name=re.compile("^Approvals")).click()
                page.screenshot(path=HERE / "approvals.png")
                page.get_by_role("link", name="Sessions").click()
                page.get_by_role("link", name="release-chat").click()
                page.screenshot(path=HERE / "session.png")
                page.get_by_role("link", name="Schedules").click()
                page.screenshot(path=HERE / "schedules.png")
                live_run(page, url, root, store_path)
                browser.close()
        finally:
            console.send_signal(signal.SIGINT)
            console.wait(30)


def live_run(page, url: str, root: Path, store_path: Path) -> None:
    """A run in progress: its page while the model works on turn 3."""
    cm = ContextManager(cwd=root, home=root / "home", state=str(store_path), env=False, project=False, user=False)
    script = [
        {"text": "Counting the lines of each note.", "code": "n = 0\nfor name in ['standup.md', 'retro.md']:\n"
         "    text = await ctx.manager.invoke('file-read', {'path': f'notes/{name}'})\n"
         "    n += len(text.splitlines())\nprint(n)", "usage": {"input_tokens": 1200, "output_tokens": 50}},
        {"text": "Now the plan.", "code": "print(len((await ctx.manager.invoke('file-read', "
         "{'path': 'notes/plan.md'})).splitlines()))", "usage": {"input_tokens": 1400, "output_tokens": 30}},
        {"delay": 30, "text": "late"},
    ]  # fmt: skip
    config = {"agent": "agent-scripted", "model_id": "eu.claude-haiku-4-5", "script": script}

    def run() -> None:
        with contextlib.suppress(Cancelled):  # the third turn never comes: the run is cut after the screenshot
            cm.invoke_sync("agent", {"prompt": "P", "name": "line-counter", "config": config}, timeout=8)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    page.goto(url.split("/?")[0] + "/")
    page.get_by_role("row", name=re.compile("line-counter")).get_by_role("link").click()
    page.get_by_role("article", name="Turn 3").wait_for()
    page.wait_for_timeout(400)
    page.screenshot(path=HERE / "live.png", full_page=True)
    thread.join(30)


if __name__ == "__main__":
    main()
