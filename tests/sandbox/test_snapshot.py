"""What every new instance starts from: the pre-initialized snapshot the build takes.

Each page of the snapshot a run writes is copied for that instance (copy-on-write), which
is most of what making a pooled sandbox costs (docs/sandbox.md, "The pool"). So the
snapshot leaves CPython's small-object allocator no free blocks scattered over its heap:
a run's new objects are packed into blocks never used, not spread one per page."""

from __future__ import annotations

import pytest

from agent_apps.sandbox import Sandbox

pytestmark = pytest.mark.anyio

#: In the guest: for the three smallest size classes (the most objects), how many 4 KiB
#: pages of linear memory 64 new objects of that size lie on.
PAGES = """
pages = {}
for size, make in [(16, object), (32, lambda: float(1)), (48, lambda: bytes(15))]:
    held = [None] * 64  # no list growth: its freed arrays would be holes of the run's own
    for i in range(64):
        held[i] = make()
    pages[size] = len({id(o) // 4096 for o in held})
pages
"""


async def test_a_new_instance_s_small_objects_come_from_unused_blocks_not_holes():
    sb = await Sandbox.start()
    try:
        res = await sb.run(PAGES)
    finally:
        await sb.close()
    assert res.error is None, res.error
    # Packed, 64 blocks fill one page and lie on 3-9 (the run's own work leaves holes
    # too, in pages it wrote anyway); from holes left in the snapshot, on 41-62.
    assert all(pages <= 16 for pages in res.value.values()), res.value
