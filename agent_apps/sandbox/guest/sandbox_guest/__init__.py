"""Guest runtime of the agent-code sandbox (runs INSIDE WebAssembly).

componentize-py builds this package, CPython and the WIT world
(``../../world.wit``) into one pre-initialized component: everything imported
here is already in memory when the host instantiates the component, so a new
sandbox starts in about a millisecond.

This code is not imported by the host interpreter. It talks to the host only
through the ``host.poll`` import (see ``_loop``) and the ``run`` export below.
Nothing in here is trusted by the host: agent code can monkeypatch any of it,
so every check that matters is repeated host-side.
"""

import gc

import wit_world

from ._runner import Runner

_runner = Runner()

# Warm the runtime up while the snapshot is taken: CPython specializes bytecode
# in place and fills lazy caches on first use, and every such write to a snapshot
# page would otherwise be a copy-on-write fault (time and resident memory) in
# every instance. The snippets make no host calls (there is no host yet).
_WARM_UP = (
    "1",
    "x = [i * 2 for i in range(20)]\nprint(len(x), end='')\nmemory['k'] = x[:3]\n{'a': x[0]}",
    "import asyncio\nasync def f(i):\n    await asyncio.sleep(0)\n    return i\n"
    "await asyncio.gather(*(f(i) for i in range(3)))",
    "def g():\n    raise ValueError('warm-up')\ng()",
    "for i in range(3):\n    pass",
)
for _ in range(40):
    for _code in _WARM_UP:
        _runner.run(_code, "")
    _runner._compiled_cache.clear()  # compiled each round: new agent code is not in the cache
_runner.reset()

# Everything alive now is part of the pre-initialized snapshot and lives for the
# instance's lifetime: move it out of the cyclic GC's sight. Without this a
# collection walks ~16,000 runtime objects (~10 ms in wasm) at random runs.
gc.collect()
gc.freeze()


class WitWorld(wit_world.WitWorld):
    """The exports of the ``sandbox`` world."""

    def run(self, code: str, setup: str) -> str:
        return _runner.run(code, setup)
