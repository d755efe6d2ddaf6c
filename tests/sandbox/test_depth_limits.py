"""The JSON depth bound at every door of the sandbox, at the limit and one past it
(docs/sandbox.md): a call's args, the run's value and the ``memory`` snapshot may nest
128 levels (the args object and ``memory`` itself included). Each door is tried through
the ordinary API and with the guest runtime bypassed, so the host's own check answers."""

from __future__ import annotations

import pytest

from agent_apps.sandbox import Sandbox, SandboxLimits

pytestmark = pytest.mark.anyio

#: docs/sandbox.md: 128 levels. A literal on purpose: a raised limit fails these tests.
LIMIT = 128


def nest(levels: int) -> str:
    """Agent code for the JSON text of ``levels`` nested lists."""
    return f"'[' * {levels} + ']' * {levels}"


def call_code(levels: int, *, raw: bool) -> str:
    """Agent code that calls ``echo`` with args ``levels`` deep: ``{"d": [[...]]}``."""
    if raw:  # the batch straight to the host's poll import, past the guest runtime
        batch = f"'{{\"calls\": [[1, \"echo\", {{\"d\": ' + {nest(levels - 1)} + '}}]], \"cancel\": []}}'"
        return f"from wit_world.imports import host\nhost.poll({batch}, 1000)\n'sent'"
    return f"import json\nawait ctx.manager.invoke('echo', {{'d': json.loads({nest(levels - 1)})}})\n'sent'"


@pytest.fixture
async def fresh(host):
    """A new sandbox per attempt (a refused batch ends its run)."""
    made = []

    async def start() -> Sandbox:
        made.append(await Sandbox.start(limits=SandboxLimits(timeout=5), call_host=host))
        return made[-1]

    yield start
    for sandbox in made:
        await sandbox.close()


@pytest.mark.parametrize("raw", [False, True], ids=["api", "raw-poll"])
async def test_call_args_at_the_limit_pass_and_one_past_is_refused(fresh, host, raw):
    res = await (await fresh()).run(call_code(LIMIT, raw=raw))
    assert res.error is None and res.value == "sent", res.error
    assert len(host.calls) == 1
    res = await (await fresh()).run(call_code(LIMIT + 1, raw=raw))
    assert res.error is not None and "malformed request" in res.error and "nested deeper" in res.error
    assert len(host.calls) == 1  # the host never called anything for it


@pytest.mark.parametrize("raw", [False, True], ids=["api", "tampered-encoder"])
async def test_a_value_at_the_limit_is_kept_and_one_past_is_refused(fresh, raw):
    sandbox = await fresh()
    for levels in (LIMIT, LIMIT + 1):
        if raw:  # the runtime's own encoder swapped: the host judges what arrives
            runner = "import sys\nrunner = sys.modules['sandbox_guest']._runner\n"
            await sandbox.run(runner + f"runner._encode_value = lambda v: {nest(levels)}")
            res = await sandbox.run("'anything'")
        else:
            res = await sandbox.run(f"import json\njson.loads({nest(levels)})")
        if levels == LIMIT:
            assert res.error is None and isinstance(res.value, list), res.error
        else:
            assert res.value is None and f"value was refused: JSON nested deeper than {LIMIT} levels" in res.error


@pytest.mark.parametrize("raw", [False, True], ids=["api", "tampered-snapshot"])
async def test_memory_at_the_limit_is_saved_and_one_past_is_not(fresh, raw):
    for levels, saved in ((LIMIT, True), (LIMIT + 1, False)):
        sandbox = await fresh()
        inner = nest(levels - 1)  # memory itself is the outermost level
        if raw:
            snapshot = f"lambda: ('{{\"d\":' + {inner} + '}}', None)"
            code = f"import sys\nsys.modules['sandbox_guest']._runner._snapshot = {snapshot}\n'done'"
        else:
            code = f"import json\nmemory['d'] = json.loads({inner})\n'done'"
        res = await sandbox.run(code)
        assert res.error is None and res.value == "done", res.error
        assert ("d" in sandbox.memory) is saved, levels
        assert ("memory was not saved" in res.output) is not saved, res.output
