"""The bounded JSON parser for untrusted text (``agent_apps._json``)."""

import pytest

from agent_apps._json import MAX_DEPTH, loads


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_depth_up_to_the_limit_is_accepted_and_one_more_is_refused():
    assert loads(nested(MAX_DEPTH)) is not None
    with pytest.raises(ValueError, match=f"nested deeper than {MAX_DEPTH} levels"):
        loads(nested(MAX_DEPTH + 1))
    with pytest.raises(ValueError, match="nested deeper than 3 levels"):
        loads('{"a": [[{"b": 1}]]}', max_depth=3)


def test_brackets_inside_strings_do_not_count_as_depth():
    text = '{"s": "' + "[{" * 500 + '", "t": [1, [2]]}'
    assert loads(text)["t"] == [1, [2]]


def test_bytes_are_checked_too():
    with pytest.raises(ValueError, match="nested deeper"):
        loads(nested(MAX_DEPTH + 1).encode())  # type: ignore[arg-type]
    assert loads(b"[1]") == [1]  # type: ignore[arg-type]


@pytest.mark.parametrize("text, words", [("NaN", "NaN is not a JSON number"), ("1e999", "too large")])
def test_non_finite_numbers_are_refused(text, words):
    with pytest.raises(ValueError, match=words):
        loads(text)
