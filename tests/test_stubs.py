"""Typed Python stubs from JSON Schemas: every shape renders as Python that parses, a
schema without a Python form falls back to its JSON, and the command line prints them."""

from __future__ import annotations

import ast

import pytest

from agent_apps import ContextManager, Skill
from agent_apps.cli import main
from agent_apps.stubs import function_name, json_doc, signature, skill_stub, stub_and_json_tokens


def stub(params=None, returns=None, description="Do it.", name="do-it"):
    metadata = {"returns": returns} if returns is not None else {}
    text = skill_stub(Skill(name, description, params=params, metadata=metadata))
    ast.parse(text)  # a stub is always Python
    return text


def obj(properties, required=(), **extra):
    return {"type": "object", "properties": properties, "required": list(required), **extra}


def test_a_keyword_signature_with_required_first_defaults_and_the_call():
    text = stub(
        obj(
            {
                "offset": {"type": "integer", "default": 0, "minimum": 0},
                "path": {"type": "string", "description": "the file"},
                "mode": {"enum": ["r", "rb"], "default": "r"},
                "verbose": {"type": "boolean"},
            },
            ["path"],
        ),
        {"type": "string", "description": "the text"},
        description="Read a file.\nBig files are cut.",
        name="file-read",
    )
    assert text == (
        'async def file_read(path: str, offset: int = 0, mode: Literal["r", "rb"] = "r", verbose: bool = ...) -> str:\n'
        '    """Read a file.\n'
        "    Big files are cut.\n"
        "\n"
        "    offset: >= 0\n"
        "    path: the file\n"
        "\n"
        "    Returns: the text\n"
        '    """\n'
        '    return await ctx.manager.invoke("file-read", {"path": path})'
    )


def test_nested_objects_arrays_unions_and_nullable():
    text = stub(
        obj(
            {
                "owner": obj({"name": {"type": "string"}, "email": {"type": "string", "format": "email"}}, ["name"]),
                "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
                "point": {"type": "array", "prefixItems": [{"type": "number"}, {"type": "number"}], "items": False},
                "limit": {"oneOf": [{"type": "integer"}, {"const": "all"}]},
                "note": {"type": ["string", "null"]},
                "extra": {"type": "object", "additionalProperties": {"type": "integer"}},
                "anything": {},
            },
            ["owner"],
        ),
        {"type": "array", "items": obj({"id": {"type": "integer"}, "ok": {"type": "boolean"}}, ["id", "ok"])},
        name="save",
    )
    assert "class SaveOwner(TypedDict):\n    name: str\n    email: NotRequired[str]  # format email" in text
    assert "class SaveResultItem(TypedDict):\n    id: int\n    ok: bool" in text
    assert (
        "async def save(owner: SaveOwner, tags: list[str] = ..., point: tuple[float, float] = ..., "
        'limit: int | Literal["all"] = ..., note: str | None = ..., extra: dict[str, int] = ..., '
        "anything: Any = ...) -> list[SaveResultItem]:"
    ) in text
    assert "    tags: unique items\n" in text
    assert text.index("class SaveOwner") < text.index("async def save")


def test_mostly_optional_fields_make_a_total_false_typeddict_and_refs_name_classes():
    text = stub(
        {
            "type": "object",
            "properties": {"where": {"$ref": "#/$defs/Place"}, "also": {"$ref": "#/$defs/Place"}},
            "required": ["where"],
            "$defs": {"Place": obj({"city": {"type": "string"}, "zip": {"type": "string"}, "country": {
                "type": "string"}}, ["city"])},
        },
        name="go",
    )
    assert text.count("class Place(TypedDict, total=False):") == 1
    assert "    city: Required[str]\n    zip: str\n    country: str" in text
    assert "async def go(where: Place, also: Place = ...) -> Any:" in text


def test_keys_python_cannot_name_become_one_typeddict_arg():
    text = stub(obj({"from": {"type": "string"}, "content-type": {"type": "string"}}, ["from"]), name="mail")
    assert 'MailArgs = TypedDict("MailArgs", {"from": str, "content-type": NotRequired[str]})' in text
    assert "async def mail(args: MailArgs) -> Any:" in text
    assert 'return await ctx.manager.invoke("mail", args)' in text


def test_no_params_and_free_form_params():
    assert stub(None, name="ping").startswith("async def ping() -> Any:")
    assert 'return await ctx.manager.invoke("ping")' in stub(None, name="ping")
    assert "async def blob(**args: Any) -> Any:" in stub({"type": "object"}, name="blob")


@pytest.mark.parametrize(
    "schema",
    [
        obj({"a": {"not": {"type": "string"}}}),
        {"type": "object", "properties": {"a": {"type": "string"}}, "if": {"required": ["a"]}, "then": {}},
        obj({"a": {"$ref": "https://example.com/schema.json"}}),
        obj({"a": {"type": "object", "patternProperties": {"^x": {}}}}),
        {"oneOf": [obj({"a": {"type": "string"}}), obj({"b": {"type": "string"}})]},
        obj({"a": {"allOf": [{"type": "string"}, {"minLength": 2}]}}),
    ],
)
def test_a_schema_without_a_python_form_falls_back_to_its_json(schema):
    text = stub(schema, name="odd")
    assert text.startswith("async def odd(**args: Any) -> Any:")
    assert "args (JSON Schema): {" in text and 'return await ctx.manager.invoke("odd", args)' in text


def test_names_and_signatures():
    assert function_name("file-read") == "file_read" and function_name("3d-print") == "_3d_print"
    assert function_name("import") == "_import"
    times = Skill("times", "Multiply.", params=obj({"n": {"type": "integer", "minimum": 1}}, ["n"]))
    assert signature(times) == "times(n: int)"
    nested = Skill("deep", params=obj({"o": obj({"x": {"type": "string"}})}))
    assert signature(nested).startswith("deep(args: {")


def test_every_bundled_skill_has_a_stub_that_parses_and_stubs_are_shorter(tmp_path):
    cm = ContextManager(cwd=tmp_path, home=tmp_path / "home", env=False, project=False, user=False,
                        entry_points=False)
    skills = cm.skills()
    for skill in skills:
        ast.parse(skill_stub(skill))
        assert skill.name in skill_stub(skill) and skill.name in json_doc(skill)
    shown = [s for s in skills if "meta-internal" not in s.tags and not s.hidden]
    stubs, docs = stub_and_json_tokens(shown)
    assert 0 < stubs < docs


def test_describe_stub_prints_the_stub(capsys):
    assert main(["describe", "file-read", "--stub"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("async def file_read(path: str, start_line: int = ..., end_line: int = ...) -> str:")
    assert 'return await ctx.manager.invoke("file-read", {"path": path})' in out


def test_skill_describe_gives_agents_the_stub(tmp_path):
    cm = ContextManager(cwd=tmp_path, home=tmp_path / "home", env=False, project=False, user=False,
                        entry_points=False)
    data = cm.invoke_sync("skill-describe", {"name": "file-list"})
    assert data["stub"].startswith("class FileListResultEntry(TypedDict, total=False):")
