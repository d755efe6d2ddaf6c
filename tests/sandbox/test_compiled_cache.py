"""The guest's cache of compiled agent code (``Runner._compiled``): the same source run
again skips the compile, and carries nothing of the run that compiled it."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.anyio

#: Keeps the code object of the run it is in (a non-JSON memory value stays in the
#: sandbox), then says whether an earlier run of the same source ran the same object.
SAME_CODE_OBJECT = (
    "import sys\n"
    "this = sys._getframe().f_code\n"
    "earlier = memory.get('code')\n"
    "memory['code'] = this\n"
    "None if earlier is None else earlier is this"
)


async def test_the_same_source_run_again_is_not_compiled_again(sb):
    assert (await sb.run(SAME_CODE_OBJECT)).value is None
    assert (await sb.run("1 + 1")).value == 2  # another source in between
    assert (await sb.run(SAME_CODE_OBJECT)).value is True


async def test_a_source_with_other_text_is_compiled_on_its_own(sb):
    await sb.run(SAME_CODE_OBJECT)
    assert (await sb.run(SAME_CODE_OBJECT + "  ")).value is False


async def test_globals_of_a_cached_run_do_not_reach_the_next_run_of_the_same_source(sb):
    code = (
        "try:\n"
        "    seen = left_behind\n"
        "except NameError:\n"
        "    seen = None\n"
        "left_behind = 'from an earlier run'\n"
        "def grow(acc=[]):\n"
        "    acc.append(1)\n"
        "    return len(acc)\n"
        "[seen, grow(), grow()]"
    )
    for _ in range(3):
        assert (await sb.run(code)).value == [None, 1, 2]


async def test_a_cached_runs_traceback_shows_its_own_lines(sb):
    code = "x = 1\nraise ValueError('first')"
    first = await sb.run(code)
    await sb.run("y = 2\nz = 3\nraise KeyError('other')")  # another source's lines in between
    again = await sb.run(code)
    assert first.error == again.error
    assert "raise ValueError('first')" in again.error and "KeyError" not in again.error


async def test_lines_changed_by_agent_code_do_not_reach_the_next_run_of_the_same_source(sb):
    code = (
        "import linecache\n"
        "if memory.pop('tamper', False):\n"
        "    linecache.cache['<agent>'][2][3] = 'tampered\\n'\n"
        "raise ValueError('x')"
    )
    await sb.run("memory['tamper'] = True")
    assert "tampered" in (await sb.run(code)).error
    res = await sb.run(code)
    assert "raise ValueError('x')" in res.error and "tampered" not in res.error


async def test_a_syntax_error_is_reported_at_every_run(sb):
    for _ in range(2):
        res = await sb.run("x = = 1")
        assert "SyntaxError" in res.error


async def test_pieces_of_a_batch_keep_their_own_file_names(sb):
    code = "raise ValueError('where')"
    results = await sb.run_batch([code, code])
    assert 'File "<agent 1>"' in results[0].error and 'File "<agent 2>"' in results[1].error
    assert (await sb.run(code)).error.count('File "<agent>"') == 1


async def test_the_cache_is_bounded(sb):
    for i in range(70):
        await sb.run(f"{i}")
    size = await sb.run("import sys\nlen(sys.modules['sandbox_guest']._runner._compiled_cache)")
    assert size.value == 64


@pytest.mark.parametrize(
    "code", ["x = 1\ny = x + 1", "n = 0\nn += 1", "d = {}\nd['k'] = [\n    1,\n    ]", "import math"]
)
async def test_code_ending_in_a_statement_is_compiled_without_a_round_trip_through_ast(sb, code):
    """The round trip (``ast.parse``, then compiling the tree) costs twice a plain compile."""
    await sb.run("import ast\nast.real_parse, ast.parse = ast.parse, None")  # a call would raise
    try:
        res = await sb.run(code)
        assert res.error is None and res.value is None
    finally:
        await sb.run("import ast\nast.parse = ast.real_parse")
