"""The shipped conformance suite, run the way a provider package runs it: one line in a
test module. A provider that ignores a directive fails it."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]
pytest.importorskip("wasmtime")

from agent_apps.sandbox._build import cache_dir  # noqa: E402

#: The sandbox cache of this session (pytester gives the inner run another HOME).
SANDBOX_CACHE = cache_dir().parent

# A provider that plays the script but ignores every directive the hook returns.
DEAF_PROVIDER = '''
frontmatter = {
    "description": "Ignores directives.",
    "params": {"type": "object"},
    "metadata": {"tags": ["meta-internal", "provider"], "visibility": "hidden"},
}

async def main(ctx, args):
    text = ""
    for turn, entry in enumerate(args["config"]["script"], 1):
        await ctx.manager.invoke(args["hook_ref"], {"type": "turn-start", "turn": turn})
        text = entry.get("text") or ""
        codes = entry.get("code") or []
        for code in [codes] if isinstance(codes, str) else codes:
            call = {"code": code}
            await ctx.manager.invoke(args["hook_ref"], {"type": "tool-call", "tool": "invoke", "args": call})
            result = await ctx.manager.invoke(args["invoke_ref"], call)
            await ctx.manager.invoke(
                args["hook_ref"], {"type": "tool-result", "tool": "invoke", "args": call, "result": result}
            )
        await ctx.manager.invoke(args["hook_ref"], {"type": "turn-end", "turn": turn, "result": text})
    return text
'''

HARNESS = '''
from pathlib import Path

from agent_apps.testing.conformance import provider_suite

class Deaf:
    name = "agent-deaf"
    search_path = [Path(__file__).parent / "provider"]

    def config(self, turns):
        return {"agent": "agent-deaf", "script": turns}

TestDeaf = provider_suite(Deaf)
'''


def test_a_provider_package_runs_the_suite_and_a_deaf_provider_fails_it(pytester, monkeypatch):
    monkeypatch.setenv("AGENT_APPS_CACHE_DIR", str(SANDBOX_CACHE))
    (pytester.path / "provider").mkdir()
    (pytester.path / "provider" / "agent-deaf.skill.py").write_text(DEAF_PROVIDER)
    pytester.makepyfile(test_my_provider=HARNESS)
    result = pytester.runpytest("-q", "-p", "no:cacheprovider", "-o", "timeout=120")
    outcomes = result.parseoutcomes()
    failed = {line.split("::")[-1].split(" ")[0] for line in result.outlines if line.startswith("FAILED")}
    # it does the work, but runs a denied call and ignores "stop"
    assert "test_directive_deny_is_obeyed" in failed, result.outlines
    assert "test_one_turn_without_tools" not in failed and outcomes.get("passed", 0) >= 5, result.outlines
