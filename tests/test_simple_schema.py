"""The quick yes for simple schemas never says yes where jsonschema says no.

Thousands of generated schemas and values (a fixed seed) are checked by both
:func:`agent_apps._simple_schema.accepts` and jsonschema's Draft 2020-12 validator
(the defaulting one for args): every "valid" from the quick check must be jsonschema's
verdict too, with the same defaults filled in; and every schema it admits must pass
jsonschema's meta-schema check.
"""

from __future__ import annotations

import copy
import json
import random
from decimal import Decimal
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from agent_apps import ContextManager
from agent_apps._schema import validator_for
from agent_apps._simple_schema import accepts, is_simple
from agent_apps.manager import _anonymous

TYPES = ["array", "boolean", "integer", "null", "number", "object", "string"]
WORDS = ["a", "b", "text", "n", "on", "items", ""]


def schema_of(rng: random.Random, depth: int = 0) -> Any:
    if rng.random() < 0.08:
        return rng.choice([True, False])
    schema: dict[str, Any] = {}
    keys = ["type", "properties", "required", "additionalProperties", "items", "enum", "default", "description",
            "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "minItems",
            "maxItems", "title", "pattern"]
    for key in rng.sample(keys, rng.randint(0, 5)):
        if key == "type":
            schema[key] = rng.choice(TYPES) if rng.random() < 0.7 else rng.sample(TYPES, rng.randint(1, 3))
        elif key == "properties" and depth < 3:
            schema[key] = {w: schema_of(rng, depth + 1) for w in rng.sample(WORDS, rng.randint(0, 3))}
        elif key == "required":
            schema[key] = rng.sample(WORDS, rng.randint(0, 2))
        elif key in ("additionalProperties", "items") and depth < 3:
            schema[key] = schema_of(rng, depth + 1)
        elif key == "enum":
            schema[key] = rng.sample(WORDS, rng.randint(1, 3))
        elif key == "default":
            schema[key] = value_of(rng, 1)
        elif key in ("description", "title"):
            schema[key] = "words"
        elif key == "pattern":
            schema[key] = rng.choice(["^a", "c$", "b", "^[a-z]*$", "^$", "x|^te", "(?=a)", "a{2000}"])
        elif key.endswith(("imum",)):
            schema[key] = rng.choice([0, 1, 2.5, -3, 10])
        elif key.startswith(("min", "max")):
            schema[key] = rng.randint(0, 3)
    return schema


def value_of(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(9 if depth < 3 else 7)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        return rng.choice([0, 1, 2, -5, 11, 3])
    if kind == 3:
        return rng.choice([0.5, 2.0, -3.25, 10.0, 1e300])
    if kind == 4:
        return rng.choice(WORDS + ["abcd", "xyzzy"])
    if kind == 5:
        return rng.choice([float("nan"), Decimal("-1"), (1, 2)])
    if kind == 6:
        return rng.choice(WORDS)
    if kind == 7:
        return [value_of(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {w: value_of(rng, depth + 1) for w in rng.sample(WORDS, rng.randint(0, 3))}


def value_for(rng: random.Random, schema: Any, depth: int = 0) -> Any:
    """A value shaped by ``schema`` (so that many pass), sometimes something else."""
    if not isinstance(schema, dict) or rng.random() < 0.15 or depth > 4:
        return value_of(rng, depth)
    kind = schema.get("type")
    kind = rng.choice(kind) if isinstance(kind, list) else kind
    if "enum" in schema and rng.random() < 0.8:
        return rng.choice(schema["enum"])
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        out = {k: value_for(rng, v, depth + 1) for k, v in props.items() if rng.random() < 0.7}
        for name in schema.get("required", ()):
            if rng.random() < 0.9:
                out.setdefault(name, value_of(rng, depth + 1))
        return out
    if kind == "array":
        return [value_for(rng, schema.get("items", {}), depth + 1) for _ in range(rng.randint(0, 3))]
    if kind == "string":
        return rng.choice(["", "a", "abc", "abcdef"])
    if kind in ("integer", "number"):
        return rng.choice([-4, 0, 1, 2, 3, 2.5, 11])
    return value_of(rng, depth)


def strict(value: Any) -> Any:
    """``value`` with the types ``==`` would blur (True == 1 == 1.0) made visible."""
    if isinstance(value, dict):
        return {k: strict(v) for k, v in value.items()}
    if isinstance(value, list):
        return [strict(v) for v in value]
    return (type(value).__name__, repr(value))


def test_every_quick_yes_is_jsonschemas_yes_with_the_same_defaults():
    rng = random.Random(20261123)
    simple = said_yes = 0
    for _ in range(3000):
        schema = schema_of(rng)
        if not is_simple(schema):
            continue
        simple += 1
        Draft202012Validator.check_schema(schema)  # admitted schemas are valid schemas
        for _ in range(3):
            value = value_for(rng, schema)
            quick, slow = copy.deepcopy(value), copy.deepcopy(value)
            if accepts(schema, quick, defaults=True):
                said_yes += 1
                errors = list(validator_for(schema, defaulting=True).iter_errors(slow))
                assert not errors, (json.dumps(schema), repr(value), errors[0].message)
                assert strict(quick) == strict(slow), (json.dumps(schema), repr(value))
            plain = copy.deepcopy(value)
            if accepts(schema, plain):
                validator = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
                assert validator.is_valid(value), (json.dumps(schema), repr(value))
                assert strict(plain) == strict(value)  # nothing filled in without defaults=True
    assert simple > 1500 and said_yes > 1500  # the generator reaches both answers often


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        ({"type": "integer"}, 2.0),  # an integer to jsonschema, not provably one here
        ({"type": "integer"}, True),
        ({"type": "number"}, Decimal("1.5")),
        ({"minimum": 0}, Decimal("-1")),  # jsonschema compares any number
        ({"maximum": 0}, float("nan")),
        ({"enum": ["a"]}, 1),
        ({"pattern": "^b"}, "abc"),
        ({"type": "array"}, (1, 2)),
        ({"required": ["on"], "properties": {"on": {"default": False}}}, {}),  # required is checked first
        ({"properties": {"a": {"type": "string"}}, "additionalProperties": False}, {"a": "x", "b": 1}),
    ],
)
def test_what_the_quick_check_does_not_prove(schema, value):
    assert is_simple(schema)
    assert not accepts(schema, copy.deepcopy(value), defaults=True)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "strin"},
        {"type": []},
        {"type": ["string", "string"]},
        {"required": ["a", "a"]},
        {"minLength": -1},
        {"minLength": 1.0},
        {"minimum": "0"},
        {"minimum": True},
        {"description": 3},
        {"properties": {"a": {"type": "nope"}}},
        {"properties": []},
        {"format": "email"},
        {"pattern": "(?=a)"},
        {"pattern": "a{2000}"},
        {"pattern": 3},
        {"$ref": "#/$defs/x"},
        {"anyOf": [{"type": "string"}]},
        {"const": 1},
        {"enum": [1, "a"]},
        {"x-extension": 1},
    ],
)
def test_schemas_outside_the_subset_go_to_jsonschema(schema):
    assert not is_simple(schema)


def test_defaults_are_filled_as_the_defaulting_validator_fills_them():
    schema = {
        "type": "object",
        "properties": {
            "opts": {"type": "object", "default": {}, "properties": {"deep": {"default": [1]}}},
            "n": {"type": "integer", "default": 3},
        },
        "additionalProperties": {"properties": {"x": {"default": "y"}}},
    }
    value = {"extra": {}}
    quick, slow = copy.deepcopy(value), copy.deepcopy(value)
    assert accepts(schema, quick, defaults=True)
    assert not list(validator_for(schema, defaulting=True).iter_errors(slow))
    assert quick == slow == {"extra": {"x": "y"}, "opts": {"deep": [1]}, "n": 3}
    assert quick["opts"] is not schema["properties"]["opts"]["default"]  # a copy, never the schema's


def test_invalid_args_still_get_jsonschemas_message(tmp_path):
    (tmp_path / "wc.skill.py").write_text(
        'frontmatter = {"params": {"type": "object", "properties": {"text": {"type": "string"}},'
        ' "required": ["text"]}, "metadata": {"returns": {"type": "integer", "minimum": 0}}}\n'
        "async def main(ctx, args):\n    return len(args['text'].split()) - args.get('minus', 0)\n"
    )
    cm = ContextManager([tmp_path], env=False, project=False, user=False, bundled=False, entry_points=False)
    assert cm.invoke_sync("wc", {"text": "a b"}) == 2
    with pytest.raises(Exception, match="42 is not of type 'string'"):
        cm.invoke_sync("wc", {"text": 42})
    with pytest.raises(Exception, match="-8 is less than the minimum of 0"):
        cm.invoke_sync("wc", {"text": "a b", "minus": 10})


def test_patterns_run_on_re2_in_the_quick_check_too():
    schema = {"type": "object", "properties": {"ref": {"type": "string", "pattern": "^callback://"}}}
    assert is_simple(schema)
    assert accepts(schema, {"ref": "callback://1"}) and accepts(schema, {"ref": 3}) is False
    assert not accepts(schema, {"ref": "http://x"})
    assert accepts({"pattern": "^a"}, 3)  # a pattern says nothing about what is not a string


@pytest.mark.parametrize("pattern", ["^callback://", "^", "^ab", "^é/ü:", "^a.b", "^a$", "^a|b", "^a\\d", "ab", "^(a)"])
def test_a_pattern_of_a_literal_prefix_is_matched_without_re2_and_answers_as_re2_does(pattern, monkeypatch):
    # RE2 releases the GIL for each match: a provider's ^callback:// is a startswith
    from agent_apps import _schema
    from agent_apps._simple_schema import compile_check

    texts = ["", "a", "ab", "abc", "xab", "a.b", "axb", "a\nb", "b", "a1", "callback://x", "callback:/", "é/ü:z", "(a)"]
    expected = [_schema.matches_pattern(pattern, text) for text in texts]
    literal = pattern.startswith("^") and not any(c in pattern[1:] for c in "\\.^$|?*+()[]{}")
    if literal:
        monkeypatch.setattr(_schema, "_re2", None)  # any use of RE2 fails
    check = compile_check({"pattern": pattern})
    assert [check(text, False) for text in texts] == expected


def test_a_scripted_agent_run_never_walks_jsonschema(tmp_path, monkeypatch):
    """Every args, result and model response of a plain run is proven valid on the quick
    path: the providers' params (with their ``^callback://`` patterns) among them."""
    from agent_apps import _schema

    (tmp_path / "once.skill.md").write_text(
        "---\nmetadata:\n  model: {agent: agent-scripted, script: [{code: 'ctx.manager.finish(1)'}]}\n---\nGo.\n"
    )
    cm = ContextManager([tmp_path], cwd=tmp_path, env=False, project=False, user=False, entry_points=False)
    assert cm.invoke_sync("once") == 1  # validators compiled, schemas checked
    walks = []
    first_error = _schema.first_error
    monkeypatch.setattr(_schema, "first_error", lambda *a: walks.append(a) or first_error(*a))
    assert cm.invoke_sync("once") == 1
    assert walks == []


class _CountedSchema(dict):
    """A schema that counts how often its keywords are read."""

    reads = 0

    def items(self):  # type: ignore[override]
        _CountedSchema.reads += 1
        return super().items()


def test_a_skills_schemas_are_compiled_once_not_read_on_every_call(tmp_path):
    """Agent code calls the same skill thousands of times: its params and returns are
    turned into checks on the first call, and later calls never walk the schemas."""
    params = _CountedSchema(type="object", properties=_CountedSchema(n={"type": "integer", "default": 1}))
    returns = _CountedSchema(type="integer", minimum=0)
    cm = ContextManager(env=False, project=False, user=False, bundled=False, entry_points=False)

    async def main(ctx, args):
        return args["n"]

    skill = {"name": "counted", "params": params, "metadata": {"returns": returns}, "main": main}
    counted = _anonymous(skill)
    assert cm.invoke_sync(counted, {}) == 1
    _CountedSchema.reads = 0
    assert [cm.invoke_sync(counted, {"n": n}) for n in range(5)] == [0, 1, 2, 3, 4]
    assert _CountedSchema.reads == 0
    with pytest.raises(Exception, match="-1 is less than the minimum of 0"):  # still jsonschema's message
        cm.invoke_sync(counted, {"n": -1})
