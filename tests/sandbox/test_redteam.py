"""Red-team suite: hostile agent code against the sandbox.

Each attempt asserts three things: the attempt fails with a clear error, the
host survives (the attacked sandbox answers again, possibly after a reset),
and a bystander sandbox is unaffected (its memory and its answers are intact).
"""

from __future__ import annotations

import asyncio
import os

import pytest

from agent_apps.sandbox import Sandbox, SandboxLimits

pytestmark = pytest.mark.anyio

LIMITS = SandboxLimits(timeout=2, memory_mb=128, output_kb=8, max_calls=50, max_payload_kb=64)
DEEP = "'[' * 5000 + ']' * 5000"  # agent code's text of a 5,000-deep JSON list


def err(*needles: str):
    """The run failed and its error contains every needle."""

    def check(res, host):
        assert res.error is not None, res
        for n in needles:
            assert n in res.error, (n, res.error)

    return check


def refused(res, host):
    """A forged ref: ToolNotAllowed, and call_host never saw it."""
    assert res.error is not None and "ToolNotAllowed" in res.error, res
    assert "may only invoke skills by bare name" in res.error
    assert host.calls == []


def value_is(expected):
    def check(res, host):
        assert res.error is None, res.error
        assert res.value == expected, res.value

    return check


ATTEMPTS = {
    # -- host files ----------------------------------------------------------------------
    "read-host-file": ("open('/etc/passwd').read()", err("FileNotFoundError")),
    "read-relative-file": ("open('pyproject.toml').read()", err("FileNotFoundError")),
    "read-proc-self": ("open('/proc/self/environ', 'rb').read()", err("FileNotFoundError")),
    "write-host-file": ("open('/tmp/agent-apps-pwned', 'w').write('x')", err("FileNotFoundError")),
    "list-root": ("import os\nos.listdir('/')", err("FileNotFoundError")),
    "list-cwd": ("import os\nos.listdir('.')", err("FileNotFoundError")),
    "pathlib-home": ("import pathlib\nlist(pathlib.Path.home().iterdir())", err("Error")),
    # -- environment -------------------------------------------------------------------------
    "environ": ("import os\nassert not os.environ, dict(os.environ)\nraise PermissionError('empty')",
                err("PermissionError: empty")),
    "getenv-home": (
        "import os\nassert os.getenv('HOME') is None and os.getenv('PATH') is None\nraise LookupError('none')",
        err("LookupError: none"),
    ),
    # -- network, processes, native code -----------------------------------------------------
    "socket-connect": ("import socket\ns = socket.socket()\ns.connect(('127.0.0.1', 22))", err("Error")),
    "dns-lookup": ("import socket\nsocket.getaddrinfo('example.com', 80)", err("Error")),
    "subprocess": ("import subprocess\nsubprocess.run(['ls', '/'])", err("OSError", "processes")),
    "os-system": ("import os\nos.system('touch /tmp/x')", err("AttributeError")),
    "os-fork": ("import os\nos.fork()", err("AttributeError")),
    "ctypes": ("import ctypes", err("ModuleNotFoundError", "ctypes")),
    "threads": ("import threading\nthreading.Thread(target=print).start()", err("RuntimeError", "thread")),
    # -- import tricks ---------------------------------------------------------------------------
    "dunder-import-ctypes": ("__import__('ctypes')", err("ModuleNotFoundError")),
    "importlib-ctypes": ("import importlib\nimportlib.import_module('_ctypes')", err("ModuleNotFoundError")),
    "sys-modules-forged-os": (
        "import sys, types\nfake = types.ModuleType('posix')\nsys.modules['posix'] = fake\n"
        "import importlib, os\nimportlib.reload(os)\nopen('/etc/passwd').read()",
        err("Error"),
    ),
    "builtins-open-patched": (
        "import builtins\nbuiltins.open = lambda *a, **k: 'pwned'\n"
        "import io\nio.open('/etc/passwd').read()",
        err("FileNotFoundError"),
    ),
    "forge-call-via-wit-import": (
        "from wit_world.imports import host\n"
        "raise RuntimeError(host.poll('{\"calls\": [[99, \"file:///etc/passwd\", null]], \"cancel\": []}', 0))",
        lambda res, host: (err("ToolNotAllowed")(res, host), host.calls == [] or pytest.fail("called")),
    ),
    "tamper-runtime-submit": (
        "import sys\nrt = sys.modules['sandbox_guest']._runner\n"
        "rt._loop._outbox.append('[7,\"inline://print(1)\",null]')\n"
        "await ctx.manager.invoke('echo')",
        lambda res, host: (host.calls == [("echo", None)] or pytest.fail(str(host.calls))),
    ),
    "tamper-runtime-payload-limit": (
        "import sys\nrt = sys.modules['sandbox_guest']._runner\nrt.max_payload = 10**9\n"
        "await ctx.manager.invoke('echo', {'x': 'a' * 200_000})",
        err("LimitExceeded", "too large", "max_payload_kb"),
    ),
    "tamper-runtime-call-limit": (
        "from wit_world.imports import host\nimport json\n"
        "calls = [[i, 'echo', None] for i in range(1, 200)]\n"
        "json.loads(host.poll(json.dumps({'calls': calls, 'cancel': []}), 1000))",
        lambda res, host: len(host.calls) <= 50 or pytest.fail(f"{len(host.calls)} calls"),
    ),
    "tamper-runtime-finish-limit": (
        "import sys\nrt = sys.modules['sandbox_guest']._runner\nrt.max_payload = 10**9\n"
        "ctx.manager.finish('a' * 200_000)",
        lambda res, host: (err("too large", "max_payload_kb")(res, host), res.finished and pytest.fail("finished")),
    ),
    "tamper-runtime-value-limit": (
        "import sys\nrt = sys.modules['sandbox_guest']._runner\nrt.max_payload = 10**9\n'a' * 200_000",
        lambda res, host: (err("too large", "max_payload_kb")(res, host), res.value is None or pytest.fail("kept")),
    ),
    "tamper-runtime-error-limit": (
        "import sys\nrt = sys.modules['sandbox_guest']._runner\nrt.output_limit = 10**9\n"
        "raise ValueError('x' * 1_000_000)",
        lambda res, host: (err("ValueError", "truncated by the host")(res, host),
                           len(res.error) < 11 * 1024 or pytest.fail(str(len(res.error)))),
    ),
    "raw-call-nan-arg": (
        "from wit_world.imports import host\n"
        "host.poll('{\"calls\": [[1, \"echo\", {\"timeout\": NaN}]], \"cancel\": []}', 1000)",
        lambda res, host: (err("malformed request", "NaN")(res, host), host.calls == [] or pytest.fail("called")),
    ),
    "raw-call-infinite-arg": (
        "from wit_world.imports import host\n"
        "host.poll('{\"calls\": [[1, \"echo\", {\"timeout\": -1e999}]], \"cancel\": []}', 1000)",
        lambda res, host: (err("malformed request", "too large")(res, host), host.calls == [] or pytest.fail("called")),
    ),
    "raw-call-infinity-literal": (
        "from wit_world.imports import host\n"
        "host.poll('{\"calls\": [[1, \"echo\", {\"n\": -Infinity}]], \"cancel\": []}', 1000)",
        lambda res, host: (err("malformed request", "Infinity")(res, host), host.calls == [] or pytest.fail("called")),
    ),
    "raw-call-deep-args": (
        "from wit_world.imports import host\n"
        f"host.poll('{{\"calls\": [[1, \"echo\", {{\"d\": ' + {DEEP} + '}}]], \"cancel\": []}}', 1000)",
        lambda res, host: (err("malformed request", "nested deeper")(res, host),
                           host.calls == [] or pytest.fail("called")),
    ),
    "raw-call-duplicate-id": (
        "from wit_world.imports import host\n"
        "host.poll('{\"calls\": [[1, \"echo\", {\"a\": 1}], [1, \"echo\", {\"a\": 2}]], \"cancel\": []}', 1000)",
        lambda res, host: (err("already used")(res, host), host.calls == [] or pytest.fail(str(host.calls))),
    ),
    "raw-call-oversized-batch": (
        "from wit_world.imports import host\nimport json\n"
        "calls = [[i, 'echo', {'x': 'a' * 60_000}] for i in range(1, 40)]\n"
        "host.poll(json.dumps({'calls': calls, 'cancel': []}), 1000)",
        lambda res, host: (err("malformed request", "in one wait")(res, host),
                           host.calls == [] or pytest.fail("called")),
    ),
    "raw-call-bool-id": (
        "from wit_world.imports import host\nhost.poll('{\"calls\": [[true, \"echo\", null]], \"cancel\": []}', 0)",
        lambda res, host: (err("malformed call")(res, host), host.calls == [] or pytest.fail("called")),
    ),
    "malformed-poll-batch": (
        "from wit_world.imports import host\nhost.poll('{not json', 0)",
        err("malformed request"),
    ),
    "malformed-call-shape": (
        "from wit_world.imports import host\nhost.poll('{\"calls\": [\"echo\"], \"cancel\": []}', 0)",
        err("malformed call"),
    ),
    # -- resource exhaustion -------------------------------------------------------------------
    "infinite-loop": ("while True:\n    pass", err("TimeoutError", "time limit")),
    "sleep-forever": ("import time\ntime.sleep(10**6)", err("TimeoutError", "time limit")),
    "select-forever": ("import select\nselect.select([], [], [], 10**6)", err("TimeoutError")),
    "selector-forever": ("import selectors\nselectors.DefaultSelector().select(10**6)", err("TimeoutError")),
    "catastrophic-regex": ("import re\nre.match(r'(a+)+$', 'a' * 64 + 'b')", err("TimeoutError")),
    "memory-bomb-one-shot": ("x = 'a' * (1 << 30)", err("MemoryError")),
    "memory-bomb-growing": ("l = []\nwhile True:\n    l.append(bytearray(1 << 20))", err("MemoryError")),
    "deep-recursion": ("def f(n):\n    return f(n + 1)\nf(0)", err("RecursionError")),
    "deep-c-recursion-json": ("import json\njson.loads('[' * 200000 + ']' * 200000)", err("RecursionError")),
    "deep-c-recursion-repr": ("l = []\nfor _ in range(200000):\n    l = [l]\nrepr(l)", err("RecursionError")),
    "output-flood": ("for _ in range(100000):\n    print('x' * 100)\nraise ValueError('flooded')",
                     lambda res, host: ("output truncated" in res.output and len(res.output) < 9 * 1024)
                     or pytest.fail(res.output[-200:])),
    "error-message-flood": ("raise ValueError('x' * 10_000_000)", err("ValueError", "truncated")),
    "hostile-repr": ("class E(Exception):\n    def __str__(self):\n        raise RuntimeError('no')\nraise E()",
                     err("E")),
    "sys-exit": ("import sys\nsys.exit(0)", err("SystemExit")),
    "raise-base-exception": ("raise KeyboardInterrupt", err("KeyboardInterrupt")),
    # -- RPC payloads ----------------------------------------------------------------------------
    "oversized-args": ("await ctx.manager.invoke('echo', {'x': 'a' * 200_000})", err("too large", "max_payload_kb")),
    "oversized-result": ("await ctx.manager.invoke('big', {'size': 200_000})", err("LimitExceeded", "too large")),
    "oversized-value": ("'a' * 200_000", err("too large", "max_payload_kb")),
    "non-json-args-set": ("await ctx.manager.invoke('echo', {'s': {1}})", err("TypeError", "JSON-serializable")),
    "non-json-args-object": (
        "await ctx.manager.invoke('echo', {'o': object()})", err("TypeError", "JSON-serializable")
    ),
    "non-json-args-nan": ("await ctx.manager.invoke('echo', {'n': float('nan')})", err("TypeError", "JSON")),
    "args-not-a-dict": ("await ctx.manager.invoke('echo', [1, 2])", err("TypeError", "dict or None")),
    "name-not-a-string": ("await ctx.manager.invoke(42)", err("TypeError", "must be a str")),
    # -- forged refs -----------------------------------------------------------------------------
    "ref-file-uri": ("await ctx.manager.invoke('file:///etc/passwd')", refused),
    "ref-file-skill": ("await ctx.manager.invoke('file://./evil.skill.py')", refused),
    "ref-inline": ("await ctx.manager.invoke('inline://async def main(ctx, args): import os')", refused),
    "ref-relative-path": ("await ctx.manager.invoke('../skills/evil.skill.py')", refused),
    "ref-absolute-path": ("await ctx.manager.invoke('/tmp/evil.skill.py')", refused),
    "ref-dot-path": ("await ctx.manager.invoke('./evil')", refused),
    "ref-upper-case": ("await ctx.manager.invoke('Echo')", refused),
    "ref-cyrillic-lookalike": ("await ctx.manager.invoke('\\u0435cho')", refused),  # Cyrillic 'е'
    "ref-cyrillic-a": ("await ctx.manager.invoke('file-re\\u0430d')", refused),  # Cyrillic 'а'
    "ref-fullwidth": ("await ctx.manager.invoke('\\uff45cho')", refused),
    "ref-callback": ("await ctx.manager.invoke('callback://agent/1234')", refused),
    "ref-empty": ("await ctx.manager.invoke('')", refused),
    "ref-very-long": ("await ctx.manager.invoke('a' * 100_000)", refused),
    "ref-whitespace": ("await ctx.manager.invoke('echo ')", refused),
    "ref-newline": ("await ctx.manager.invoke('echo\\nfile-read')", refused),
    "ref-double-hyphen": ("await ctx.manager.invoke('echo--x')", refused),
    "ref-nul": ("await ctx.manager.invoke('echo\\x00')", refused),
    "ref-windows-path": ("await ctx.manager.invoke('C:\\\\evil.py')", refused),
}


@pytest.fixture
async def bystander():
    s = await Sandbox.start(memory={"secret": "bystander"}, limits=LIMITS)
    try:
        yield s
    finally:
        await s.close()


@pytest.mark.parametrize("name", list(ATTEMPTS))
async def test_attempt(name, host, bystander):
    code, check = ATTEMPTS[name]
    s = await Sandbox.start(memory={"mine": name}, limits=LIMITS, call_host=host)
    try:
        res = await s.run(code)
        check(res, host)
        # the host survived: the attacked sandbox answers again (maybe after a reset)
        again = await s.run("1 + 1")
        assert again.value == 2, again
        # and the bystander is untouched
        seen = await bystander.run("[memory, 6 * 7]")
        assert seen.value == [{"secret": "bystander"}, 42], seen
    finally:
        await s.close()
    assert not os.path.exists("/tmp/agent-apps-pwned")


async def test_memory_does_not_leak_between_sandboxes(host):
    a = await Sandbox.start(memory={"owner": "a"}, call_host=host)
    b = await Sandbox.start(memory={"owner": "b"}, call_host=host)
    try:
        await a.run("memory['token'] = 'secret-a'\nimport builtins\nbuiltins.LEAK = 'from a'\n"
                    "import sys\nsys.modules['json'].LEAK = 'a'")
        res = await b.run(
            "import builtins, json\n[memory, getattr(builtins, 'LEAK', None), getattr(json, 'LEAK', None)]"
        )
        assert res.value == [{"owner": "b"}, None, None]
        assert a.memory == {"owner": "a", "token": "secret-a"} and b.memory == {"owner": "b"}
    finally:
        await a.close()
        await b.close()


async def test_pooled_sandboxes_do_not_inherit_state(host):
    from agent_apps.sandbox import SandboxPool

    async with SandboxPool(size=1) as pool:
        a = await pool.acquire(memory={"x": 1}, call_host=host)
        await a.run("memory['y'] = 2\nimport builtins\nbuiltins.LEAK = 1")
        await a.close()
        await pool.wait_ready()
        b = await pool.acquire(memory={}, call_host=host)
        try:
            res = await b.run("import builtins\n[memory, hasattr(builtins, 'LEAK')]")
            assert res.value == [{}, False]
        finally:
            await b.close()


async def test_many_traps_in_a_row_keep_the_host_alive(host):
    s = await Sandbox.start(memory={"k": 1}, limits=SandboxLimits(timeout=0.3), call_host=host)
    try:
        for code in ("while True: pass", "import json\njson.loads('[' * 100000)", "while True: pass"):
            res = await s.run(code)
            assert res.replaced
        assert (await s.run("memory")).value == {"k": 1}
    finally:
        await s.close()


async def test_tampered_runtime_cannot_crash_the_host(host, bystander):
    s = await Sandbox.start(limits=LIMITS, call_host=host)
    try:
        res = await s.run(
            "import sys\nrt = sys.modules['sandbox_guest']._runner\n"
            "rt.run = lambda code, setup: 'not json' if code != 'memory' else '[1, 2]'"
        )
        assert res.error is None
        res = await s.run("1 + 1")  # the sandbox broke itself...
        assert "SandboxError" in res.error and "malformed" in res.error
        res = await s.run("memory")
        assert "SandboxError" in res.error
        # ...and only itself
        assert (await bystander.run("memory['secret']")).value == "bystander"
    finally:
        await s.close()


async def test_patching_json_does_not_break_the_runtime(sb):
    await sb.run("import json\njson.dumps = lambda *a, **k: 'garbage'\njson.loads = None")
    res = await sb.run("memory['x'] = [1, 2]\nmemory")
    assert res.value == {"seed": 1, "x": [1, 2]}
    assert sb.memory == {"seed": 1, "x": [1, 2]}


TAMPERED_REPORTS = {
    # the runtime's own encoder swapped: what reaches the host is judged by the host
    "deep-value": ("rt._encode_value = lambda v: " + DEEP, "value was refused: JSON nested deeper than 128 levels"),
    "nan-value": ("rt._encode_value = lambda v: 'NaN'", "value was refused: NaN is not a JSON number"),
    "huge-value": ("rt._encode_value = lambda v: '\"' + 'a' * 200_000 + '\"'", "value is too large"),
    "malformed-envelope": (
        "run = rt.run\nrt.run = lambda code, setup: run(code, setup).replace('\"output\":', '\"output\":[', 1)",
        "malformed result",
    ),
}


@pytest.mark.parametrize("name", sorted(TAMPERED_REPORTS))
async def test_tampered_run_reports_are_checked_by_the_host(name, host, bystander):
    patch, words = TAMPERED_REPORTS[name]
    s = await Sandbox.start(memory={"kept": 1}, limits=LIMITS, call_host=host)
    try:
        res = await s.run(f"import sys\nrt = sys.modules['sandbox_guest']._runner\n{patch}\nprint('hi')")
        res = await s.run("print('still here')\nmemory['more'] = 2\n'x'")
        assert res.error is not None and words in res.error, res
        assert res.value is None and not res.finished
        if name != "malformed-envelope":  # the rest of the report is kept
            assert res.output.startswith("still here") and s.memory == {"kept": 1, "more": 2}
        assert (await bystander.run("memory['secret']")).value == "bystander"
    finally:
        await s.close()


MEMORY_ATTACKS = {
    "deep": ("rt._snapshot = lambda: ('{\"d\":' + " + DEEP + " + '}', None)", "nested deeper than 128"),
    "nan": ("rt._snapshot = lambda: ('{\"d\": NaN}', None)", "NaN is not a JSON number"),
    "not-a-dict": ("rt._snapshot = lambda: ('[1, 2]', None)", "must be a dict"),
    "huge": ("memory['big'] = 'a' * 100_000", "more than 64 KB (max_payload_kb)"),
}


@pytest.mark.parametrize("name", sorted(MEMORY_ATTACKS))
async def test_memory_snapshots_are_checked_by_the_host(name, host):
    """A snapshot the host cannot keep is reported to the model; the last good one stays."""
    patch, words = MEMORY_ATTACKS[name]
    s = await Sandbox.start(memory={"kept": 1}, limits=LIMITS, call_host=host)
    try:
        res = await s.run(f"import sys\nrt = sys.modules['sandbox_guest']._runner\n{patch}\n'done'")
        assert res.error is None and res.value == "done", res
        assert "[error: memory was not saved" in res.output and words in res.output, res.output
        assert s.memory == {"kept": 1}
        assert (await s.run("1 + 1")).value == 2
    finally:
        await s.close()


async def test_a_reused_call_id_cannot_leave_a_call_running(tmp_path):
    """Two calls with one id: the second is refused, the first is still tracked, so it
    is cancelled when the run ends instead of finishing its work afterwards."""
    marker = tmp_path / "written"
    started = asyncio.Event()

    async def call_host(name, args):
        started.set()
        await asyncio.sleep(1.0)
        marker.write_text(name)
        return "done"

    s = await Sandbox.start(limits=LIMITS, call_host=call_host)
    try:
        res = await s.run(
            "from wit_world.imports import host\n"
            "host.poll('{\"calls\": [[1, \"slow\", null]], \"cancel\": []}', 0)\n"
            "host.poll('{\"calls\": [], \"cancel\": []}', 100)  # the host starts the call meanwhile\n"
            "host.poll('{\"calls\": [[1, \"slow\", null]], \"cancel\": []}', 0)"
        )
        assert "already used" in res.error
        await asyncio.sleep(1.5)
        assert started.is_set() and not marker.exists()
    finally:
        await s.close()


WASI_WAITS = {  # WASI's own waits, rebuilt past the guest runtime's rerouting
    "select": "del sys.modules['select']\nimport select\nselect.select([], [], [], 30)",
    "poll": "del sys.modules['select']\nimport select\nselect.poll().poll(30_000)",
    "sleep": "del sys.modules['time']\nimport time\ntime.sleep(30)",
}


async def test_waits_outside_the_event_loop_never_block_the_host(host):
    """Every WASI wait agent code can dig out is refused before it blocks: the host's
    event loop keeps running (a heartbeat ticks all along), each sandbox is reset with
    its memory, and nothing is left behind (no thread, no cap on how often)."""
    beats = 0

    async def heartbeat():
        nonlocal beats
        while True:
            await asyncio.sleep(0.001)
            beats += 1

    ticker = asyncio.ensure_future(heartbeat())
    boxes = [await Sandbox.start(memory={"i": i}, limits=SandboxLimits(timeout=60), call_host=host) for i in range(3)]
    try:
        for _ in range(3):  # more often than the old cap on stuck workers allowed
            results = await asyncio.gather(*(
                box.run("import sys\n" + WASI_WAITS[name])
                for box, name in zip(boxes, sorted(WASI_WAITS), strict=True)
            ))
            for res in results:
                assert res.replaced and "waited on WASI's clock directly" in res.error, res
                # each asked to wait 30 s: one that blocked would have taken all of it (a
                # busy machine's CPU time to reset the sandbox is not a wait; the loop may
                # not tick while the reset runs on it, so ticks per round prove nothing)
                assert res.duration < 15, res
        assert beats > 0  # and the loop ran its other tasks between the rounds
        for i, box in enumerate(boxes):
            assert (await box.run("memory")).value == {"i": i}
    finally:
        ticker.cancel()
        for box in boxes:
            await box.close()


def test_a_process_whose_guests_were_refused_waits_exits_cleanly():
    """The test above, in a process of its own: the process exits with its own status,
    not a crash at exit (ctypes callbacks into Python once did that)."""
    import subprocess
    import sys
    from pathlib import Path

    test = f"{Path(__file__)}::test_waits_outside_the_event_loop_never_block_the_host"
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
