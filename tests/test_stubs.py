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


# -- any text in a schema gives a stub that is valid Python ------------------------------------

#: Text that broke stubs or could: quotes that close a docstring, escapes Python refuses
#: (\x, \N, \u), NUL, lone surrogates, line ends a comment does not survive, controls.
TRICKY = [
    '"', 'ends in "', '""', '"""', '""""', 'a """ b', "\\", "ends in \\", "\\x", "\\xZZ", "\\N{nope}", "\\u12",
    "\\U1", '\\"', '\\"""', "\x00", "nul\x00inside", "\ud800", "lone \udfff surrogate", "\r", "a\rb", "a\r\nb",
    "line\nbreak", "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029", "\x1b[2J\x1b]52;c;eA==\x07", "\x9b2J", "\u202eevil",
    "'''", "# not a comment", "\t tab", "'", "{}", "{0}", "%s", "é 中文 🙂", "",
]
ALPHABET = ['"', "'", "\\", "x", "N", "u", "{", "}", "\n", "\r", "\x00", "\ud800", "\x1b", "\x85", "\u202e", " ", "a",
            "#", "\t", "\u2028", "é"]


def random_texts(count: int, seed: int = 27) -> list[str]:
    import random

    rng = random.Random(seed)
    return ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 12))) for _ in range(count)]


def every_place(text: str) -> Skill:
    """A skill with ``text`` everywhere a stub shows schema text."""
    field = {"type": "string", "description": text, "pattern": text, "format": text, "default": text}
    params = obj({"a": field, "b": {"enum": [text, "x"]}, "c": {"const": text},
                  "nested": obj({"inner": {"type": "string", "description": text, "pattern": text}}, ["inner"])})
    returns = {"type": "object", "description": text, "properties": {"r": {"type": "string", "description": text}}}
    return Skill("tricky", text, params=params, metadata={"returns": returns})


def docstring_of(stub_text: str) -> str:
    tree = ast.parse(stub_text)
    (function,) = [node for node in tree.body if isinstance(node, ast.AsyncFunctionDef)]
    value = function.body[0].value  # type: ignore[attr-defined]
    return value.value


@pytest.mark.parametrize("text", TRICKY + random_texts(400))
def test_any_text_in_a_schema_gives_a_stub_that_compiles_and_says_that_text(text):
    stub_text = skill_stub(every_place(text))
    compile(stub_text, "<stub>", "exec")  # valid Python: parses and encodes
    assert not any(ch in stub_text for ch in "\x00\x1b\x9b\u202e\x85"), repr(stub_text)
    if "\n" not in text and text.strip() == text and "\r" not in text:
        # the docstring's first line is the description itself, not a mangled copy
        assert docstring_of(stub_text).split("\n")[0] == (text or "(no description)")


@pytest.mark.parametrize("text", TRICKY + random_texts(100, seed=9))
def test_any_text_gives_a_valid_fallback_stub(text):
    skill = Skill("tricky", text, params={"type": "object", "not": {"description": text}})  # no Python form
    stub_text = skill_stub(skill)
    assert "args (JSON Schema)" in stub_text
    compile(stub_text, "<stub>", "exec")


def test_describe_stub_of_a_hostile_description_is_valid_python(tmp_path, capsys, monkeypatch):
    skills = tmp_path / "skills"
    skills.mkdir()
    description = 'Says "hi" \\x and ends in a quote"'
    (skills / "quote.skill.py").write_text(
        f"frontmatter = {{'description': {description!r}}}\nasync def main(ctx, args):\n    return 1\n"
    )
    monkeypatch.chdir(tmp_path)
    assert main(["describe", "quote", "--stub", "--path", str(skills)]) == 0
    printed = capsys.readouterr().out
    compile(printed, "<stub>", "exec")
    assert docstring_of(printed) == description
