"""The bounded JSON parser for untrusted text (``agent_apps._json``), and the same bound on
every value that crosses the pipeline (args and results, whoever sends them)."""

import pytest

from agent_apps import ArgsInvalid, ResultInvalid
from agent_apps._json import loads

#: docs/security.md and docs/sandbox.md: JSON from agent code nests at most 128 levels.
#: A literal on purpose: a limit raised in the code fails these tests.
LIMIT = 128


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_depth_up_to_the_limit_is_accepted_and_one_more_is_refused():
    assert loads(nested(LIMIT)) is not None
    assert loads('{"a": ' + nested(LIMIT - 1) + "}") is not None
    for text in (nested(LIMIT + 1), '{"a": ' + nested(LIMIT) + "}"):
        with pytest.raises(ValueError, match=f"nested deeper than {LIMIT} levels"):
            loads(text)
    with pytest.raises(ValueError, match="nested deeper than 3 levels"):
        loads('{"a": [[{"b": 1}]]}', max_depth=3)
    assert loads('{"a": [[1]]}', max_depth=3) == {"a": [[1]]}


def test_a_wide_value_is_as_deep_as_its_deepest_branch():
    text = "[" + ", ".join([nested(LIMIT - 2)] * 50 + [nested(LIMIT - 1)]) + "]"
    assert len(loads(text)) == 51
    with pytest.raises(ValueError, match="nested deeper"):
        loads("[" + ", ".join([nested(LIMIT - 1)] * 50 + [nested(LIMIT)]) + "]")


@pytest.mark.anyio
async def test_args_and_results_of_every_call_are_held_to_the_limit(context_manager, write_skill):
    """The args object counts as a level, and the result's outermost container too."""
    import json

    write_skill(
        "deep",
        "import json\nfrontmatter = {'params': {'type': 'object'}}\n"
        "async def main(ctx, args):\n    n = args.get('n', 1)\n    return json.loads('[' * n + ']' * n)\n",
    )
    assert await context_manager.invoke("deep", {"n": LIMIT}) is not None
    with pytest.raises(ResultInvalid, match=f"nested deeper than {LIMIT} levels"):
        await context_manager.invoke("deep", {"n": LIMIT + 1})
    assert await context_manager.invoke("deep", {"d": json.loads(nested(LIMIT - 1))}) is not None
    with pytest.raises(ArgsInvalid, match=f"nested deeper than {LIMIT} levels"):
        await context_manager.invoke("deep", {"d": json.loads(nested(LIMIT))})


def test_brackets_inside_strings_do_not_count_as_depth():
    text = '{"s": "' + "[{" * 500 + '", "t": [1, [2]]}'
    assert loads(text)["t"] == [1, [2]]


def test_bytes_are_checked_too():
    with pytest.raises(ValueError, match="nested deeper"):
        loads(nested(LIMIT + 1).encode())  # type: ignore[arg-type]
    assert loads(b"[1]") == [1]  # type: ignore[arg-type]


@pytest.mark.parametrize("text, words", [("NaN", "NaN is not a JSON number"), ("1e999", "too large")])
def test_non_finite_numbers_are_refused(text, words):
    with pytest.raises(ValueError, match=words):
        loads(text)


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ({"a": 1, "b": "x", "c": [1, True, None, {"d": float("nan")}]}, "result.c[3].d"),
        ({"a": [1, 2, (3, {"k": {1: "int key"}})]}, "result.a[2][1].k"),
        ([{"ok": 1.5}, "s", {"set": {1, 2}}], "result[2].set"),
        ({"deep": [[[[0, float("inf")]]]]}, "result.deep[0][0][0][1]"),
    ],
)
def test_a_value_that_is_not_json_is_found_beside_scalars_with_its_path(value, path):
    from agent_apps.validation import json_problem

    problem = json_problem(value)
    assert problem is not None and problem[0] == path


def test_json_values_of_every_kind_pass_and_scalar_subclasses_are_checked_too():
    import enum

    from agent_apps.validation import json_problem

    class Level(float, enum.Enum):
        BAD = float("nan")

    assert json_problem({"a": [1, 2.5, "x", True, None, {"b": [[], {}]}]}) is None
    assert json_problem({"level": Level.BAD}) == ("result.level", "Level.BAD is not a JSON number")


class _Odd:
    def __repr__(self) -> str:
        return "<odd é>"


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"allow_nan": False},
        {"ensure_ascii": False, "separators": (",", ":"), "default": repr},
    ],
)
def test_the_direct_encoder_writes_what_json_encoder_writes(options):
    """``_json.encoder`` (the C encoder without ``encode``'s and ``iterencode``'s frames)
    gives the text, and raises the error, that ``json.JSONEncoder(**options).encode``
    does: for every kind of value, non-ASCII, floats, NaN, a circular list, values that
    are not JSON; and encoding inside ``default`` (reentrant) keeps its own markers."""
    import json

    from agent_apps._json import encoder

    ours, theirs = encoder(**options), json.JSONEncoder(**options).encode
    shared = [1, 2]
    values = [
        None, True, 0, -3, 1.5, 1e300, "é\u2028\ud800\"x", "", [], {}, [shared, shared],
        {"a": [1, {"b": None}], "ü": "snow ☃", "n": 2.0}, (1, "t"), {1: "int key", None: 0}, float("nan"),
        float("inf"), {"x": _Odd()}, {"s": {1, 2}}, 10**40,
    ]
    circular: list[object] = []
    circular.append(circular)
    values.append(circular)
    for value in values:
        try:
            expected: object = theirs(value)
        except (TypeError, ValueError) as exc:
            expected = (type(exc), str(exc))
        try:
            got: object = ours(value)
        except (TypeError, ValueError) as exc:
            got = (type(exc), str(exc))
        assert got == expected, value
    if options.get("default") is repr:  # an encoding inside an encoding keeps its own markers

        def inner(value: object) -> object:
            return json.loads(ours([shared, shared, repr(value)]))

        assert encoder(default=inner)({"k": _Odd()}) == json.JSONEncoder(default=inner).encode({"k": _Odd()})
