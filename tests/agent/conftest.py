from __future__ import annotations

import pytest

from agent_apps.testing.conformance import TOOLS as CONFORMANCE_TOOLS

#: The conformance suite's tools (word-count, slow-tool) and a hidden one.
TOOLS = {
    **CONFORMANCE_TOOLS,
    "secret": """
        frontmatter = {"description": "Hidden.", "metadata": {"visibility": "hidden"}}
        async def main(ctx, args):
            return "secret!"
    """,
}


@pytest.fixture
def tools(write_skill):
    for name, source in TOOLS.items():
        write_skill(name, source)
