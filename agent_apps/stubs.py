"""Typed Python stubs of skills, generated from their JSON Schemas.

The model reads what it may call as Python it already knows how to write::

    class FileListResultEntry(TypedDict, total=False):
        name: str
        type: Literal["file", "dir", "link", "other"]
        size: int

    async def file_list(path: str = ".", recursive: bool = False, limit: int = 1000) -> FileListResult:
        \"\"\"List files and directories at a path ...

        limit: >= 1; <= 10000
        \"\"\"
        return await ctx.manager.invoke("file-list", {})

A stub is shorter than the JSON Schema it comes from (``benchmarks/bench_context.py``
measures by how much) and says the same: the args become a keyword signature (required
parameters first; a default shows the schema's ``default``, ``= ...`` an optional
parameter without one), nested objects ``TypedDict`` classes, ``enum`` and ``const``
``Literal``, arrays ``list[...]`` (``prefixItems`` a ``tuple``), ``oneOf``/``anyOf``
and type lists unions, local ``$ref`` the class of the definition, the result type
``metadata.returns``; descriptions and constraints (bounds, lengths, patterns,
formats) become docstring lines and comments. The body is the call that runs the skill,
with the required args; optional ones go into the same dict.

A schema with a keyword that has no faithful Python form (``not``, ``if``/``then``,
``patternProperties``, ...) is not guessed at: that skill's stub shows its JSON Schema
instead (:func:`skill_stub` never fails).
"""

from __future__ import annotations

import json
import keyword
import re
from typing import Any

from .skill import Skill
from .terminal import UNSAFE_CHARS

__all__ = ["function_name", "json_doc", "signature", "skill_stub", "stub_and_json_tokens"]

#: Keywords that only annotate a schema: they change nothing in a stub.
_ANNOTATIONS = frozenset(
    {
        "$schema", "$id", "$comment", "$anchor", "title", "description", "default", "examples",
        "deprecated", "readOnly", "writeOnly", "contentMediaType", "contentEncoding",
    }
)
#: Constraints shown as words next to the type (docstring lines, comments).
_CONSTRAINTS = frozenset(
    {
        "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength", "maxLength",
        "pattern", "format", "minItems", "maxItems", "uniqueItems", "minProperties", "maxProperties",
    }
)
#: Keywords the renderer understands; anything else makes a schema unrenderable.
_STRUCTURE = frozenset(
    {
        "type", "properties", "required", "additionalProperties", "items", "prefixItems", "enum", "const",
        "oneOf", "anyOf", "allOf", "$ref", "$defs", "definitions", "nullable",
    }
)
_SCALARS = {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "null": "None"}
#: What a stub writes as an escape: what Python source cannot hold (NUL, lone
#: surrogates) and what could steer a terminal (``describe --stub`` prints stubs).
_SOURCE_UNSAFE = re.compile(f"[{UNSAFE_CHARS}\ud800-\udfff]")
#: A quote that is followed by another, or ends the text: one that could close a docstring.
_CLOSING_QUOTE = re.compile(r'"(?="|\Z)')
_CACHE_KEY = "stub"


class Unrenderable(Exception):
    """A schema (part) without a faithful Python form; the stub falls back to JSON."""


def function_name(skill_name: str) -> str:
    """``file-read`` -> ``file_read`` (a name that starts with a digit gets an ``_``)."""
    name = skill_name.replace("-", "_")
    return f"_{name}" if not name or name[0].isdigit() or keyword.iskeyword(name) else name


def skill_stub(skill: Skill) -> str:
    """The skill as a Python stub (cached on the skill); its JSON Schema when some part
    of it has no Python form."""
    cached = skill._cache.get(_CACHE_KEY)
    if cached is None:
        try:
            cached = _Renderer(skill).stub()
        except Unrenderable:
            cached = _fallback(skill)
        skill._cache[_CACHE_KEY] = cached
    return str(cached)


def signature(skill: Skill) -> str:
    """``name(param: type = default, ...)``: a middleware's activation params, on one
    line (a schema without a Python form shows as JSON)."""
    try:
        renderer = _Renderer(skill)
        params = renderer.parameters()
        if renderer.classes:  # nested types do not fit on one line
            raise Unrenderable("nested")
    except Unrenderable:
        return f"{skill.name}(args: {_json(skill.params)})"
    return f"{skill.name}({params})"


def json_doc(skill: Skill) -> str:
    """The skill as its JSON Schemas (the form stubs replace): for comparison and for
    readers that want the schema itself."""
    doc = f"### {skill.name}\n{skill.description.strip() or '(no description)'}\nargs: "
    doc += _json(skill.params) if skill.params is not None else "no args"
    if skill.returns is not None:
        doc += f"\nreturns: {_json(skill.returns)}"
    return doc


def stub_and_json_tokens(skills: list[Skill]) -> tuple[int, int]:
    """Estimated tokens (four characters a token) of the stubs and of the JSON docs."""
    from .state.messages import estimate_text

    stubs = "\n\n".join(skill_stub(s) for s in skills)
    docs = "\n\n".join(json_doc(s) for s in skills)
    return estimate_text(stubs), estimate_text(docs)


# -- rendering ---------------------------------------------------------------------------


class _Renderer:
    """One skill's stub: the classes its schemas need, then the function."""

    def __init__(self, skill: Skill) -> None:
        self.skill = skill
        self.prefix = _camel(skill.name)
        self.classes: list[str] = []
        self._class_names: set[str] = set()
        self._defs: dict[str, Any] = {}
        self._def_classes: dict[str, str] = {}
        self._roots: set[int] = set()  # the schemas whose $defs are in scope
        #: The TypedDict of the args when their keys are not all Python names.
        self._args_class: str | None = None

    def stub(self) -> str:
        skill = self.skill
        params = self.parameters()
        returns = self.type_of(skill.returns, f"{self.prefix}Result", root=True) if skill.returns else "Any"
        head = f"async def {function_name(skill.name)}({params}) -> {returns}:"
        doc = [skill.description.strip() or "(no description)"]
        arg_lines = self._param_docs()
        if arg_lines:
            doc += ["", *arg_lines]
        if isinstance(skill.returns, dict) and skill.returns.get("description"):
            doc += ["", f"Returns: {_line(skill.returns['description'])}"]
        body = [head, _docstring(doc), f"    return {self.call()}"]
        return "\n\n".join([*self.classes, "\n".join(body)])

    def call(self) -> str:
        name = json.dumps(self.skill.name)
        params = self.skill.params
        if params is None:
            return f"await ctx.manager.invoke({name})"
        if self._args_class is not None or not _properties(params):
            return f"await ctx.manager.invoke({name}, args)"
        required = [key for key in _properties(params) if key in _required(params)]
        given = ", ".join(f"{json.dumps(key)}: {key}" for key in required)
        return f"await ctx.manager.invoke({name}, {{{given}}})"

    def parameters(self) -> str:
        """The signature's parameters (classes they need go to :attr:`classes`)."""
        params = self.skill.params
        if params is None:
            return ""
        self._add_root(params)
        _check(params)
        if {"oneOf", "anyOf", "allOf", "$ref", "enum", "const"} & set(params):
            raise Unrenderable("args that are not one plain object")
        props = _properties(params)
        if not props:
            extra = params.get("additionalProperties")
            value = self.type_of(extra, f"{self.prefix}Value") if isinstance(extra, dict) else "Any"
            return f"**args: {value}"
        if not all(_identifier(key) for key in props):  # keys Python cannot name: one TypedDict arg
            self._args_class = self._typed_dict(params, f"{self.prefix}Args")
            return f"args: {self._args_class}"
        required = _required(params)
        out = []
        for key in sorted(props, key=lambda k: k not in required):  # required first, else schema order
            schema = props[key]
            text = f"{key}: {self.type_of(schema, self.prefix + _camel(key))}"
            if key not in required:
                has_default = isinstance(schema, dict) and "default" in schema
                text += f" = {_literal(schema['default'])}" if has_default else " = ..."
            out.append(text)
        return ", ".join(out)

    def _param_docs(self) -> list[str]:
        params = self.skill.params
        if params is None or self._args_class is not None:
            return []
        lines = []
        for key, schema in _properties(params).items():
            note = _note(schema)
            if note:
                lines.append(f"{key}: {note}")
        return lines

    # -- types -------------------------------------------------------------------------------

    def _add_root(self, schema: Any) -> None:
        if not isinstance(schema, dict):
            raise Unrenderable("not a mapping")
        for key in ("definitions", "$defs"):
            defs = schema.get(key, {})
            if not isinstance(defs, dict):
                raise Unrenderable(key)
            self._defs.update(defs)
        self._roots.add(id(schema))

    def type_of(self, schema: Any, hint: str, *, root: bool = False) -> str:
        if root:
            self._add_root(schema)
        if schema is True or schema == {} or schema is None:
            return "Any"
        if not isinstance(schema, dict):
            raise Unrenderable(f"schema {schema!r}")
        _check(schema)
        if ("$defs" in schema or "definitions" in schema) and id(schema) not in self._roots:
            raise Unrenderable("definitions below the top")
        if "$ref" in schema:
            return self._ref(schema["$ref"])
        if "const" in schema:
            return f"Literal[{_literal(schema['const'])}]"
        if "enum" in schema:
            values = schema["enum"]
            if not isinstance(values, list) or not values or not all(_literal_ok(v) for v in values):
                raise Unrenderable("enum")
            return _nullable(schema, f"Literal[{', '.join(_literal(v) for v in values)}]")
        for key in ("oneOf", "anyOf"):
            if key in schema:
                options = schema[key]
                if not isinstance(options, list) or not options:
                    raise Unrenderable(key)
                rest = {k: v for k, v in schema.items() if k != key and k not in _ANNOTATIONS | _CONSTRAINTS}
                merged = [{**rest, **o} if isinstance(o, dict) and rest else o for o in options]
                hints = [f"{hint}{i + 1}" if len(options) > 1 else hint for i in range(len(options))]
                return _union(self.type_of(o, h) for o, h in zip(merged, hints, strict=True))
        if "allOf" in schema:
            parts = schema["allOf"]
            if not isinstance(parts, list) or len(parts) != 1:
                raise Unrenderable("allOf")
            rest = {k: v for k, v in schema.items() if k != "allOf"}
            return self.type_of({**rest, **parts[0]} if isinstance(parts[0], dict) else parts[0], hint)
        kind = schema.get("type")
        if isinstance(kind, list):
            return _union(self.type_of({**schema, "type": k}, hint) for k in kind)
        if kind is None:
            if "properties" in schema or "additionalProperties" in schema:
                kind = "object"
            elif "items" in schema or "prefixItems" in schema:
                kind = "array"
            else:
                return _nullable(schema, "Any")
        if kind in _SCALARS:
            return _nullable(schema, _SCALARS[kind])
        if kind == "array":
            return _nullable(schema, self._array(schema, hint))
        if kind == "object":
            return _nullable(schema, self._object(schema, hint))
        raise Unrenderable(f"type {kind!r}")

    def _array(self, schema: dict[str, Any], hint: str) -> str:
        if "prefixItems" in schema:
            items = schema["prefixItems"]
            if not isinstance(items, list) or schema.get("items") not in (None, False):
                raise Unrenderable("prefixItems with more items")
            return f"tuple[{', '.join(self.type_of(s, f'{hint}{i + 1}') for i, s in enumerate(items))}]"
        return f"list[{self.type_of(schema.get('items'), _singular(hint))}]"

    def _object(self, schema: dict[str, Any], hint: str) -> str:
        if _properties(schema):
            return self._typed_dict(schema, hint)
        extra = schema.get("additionalProperties")
        value = self.type_of(extra, f"{hint}Value") if isinstance(extra, dict) else "Any"
        return f"dict[str, {value}]"

    def _typed_dict(self, schema: dict[str, Any], hint: str) -> str:
        name = self._class_name(hint)
        props, required = _properties(schema), _required(schema)
        optional = [k for k in props if k not in required]
        total = len(optional) <= len(props) - len(optional)  # total=False when most are optional
        fields = []
        for key, sub in props.items():
            kind = self.type_of(sub, name + _camel(key))
            if total and key not in required:
                kind = f"NotRequired[{kind}]"
            elif not total and key in required:
                kind = f"Required[{kind}]"
            fields.append((key, kind, _note(sub)))
        if all(_identifier(key) for key in props):
            lines = [f"class {name}(TypedDict{'' if total else ', total=False'}):"]
            lines += [f"    {key}: {kind}" + (f"  # {_comment(note)}" if note else "") for key, kind, note in fields]
        else:
            items = ", ".join(f"{json.dumps(key)}: {kind}" for key, kind, _ in fields)
            lines = [f"{name} = TypedDict({json.dumps(name)}, {{{items}}}{'' if total else ', total=False'})"]
        self.classes.append("\n".join(lines))
        return name

    def _ref(self, ref: Any) -> str:
        match = re.fullmatch(r"#/(\$defs|definitions)/([^/]+)", ref) if isinstance(ref, str) else None
        if match is None or match[2] not in self._defs:
            raise Unrenderable(f"$ref {ref!r}")
        key = match[2]
        if key not in self._def_classes:
            self._def_classes[key] = _camel(key)  # set first: a recursive ref names the class
            target = self._defs[key]
            rendered = self.type_of(target, _camel(key))
            if rendered != self._def_classes[key]:  # not an object: an alias of its type
                self._def_classes[key] = rendered
        return self._def_classes[key]

    def _class_name(self, hint: str) -> str:
        name, n = hint, 2
        while name in self._class_names:
            name, n = f"{hint}{n}", n + 1
        self._class_names.add(name)
        return name


def _check(schema: dict[str, Any]) -> None:
    unknown = set(schema) - _ANNOTATIONS - _CONSTRAINTS - _STRUCTURE
    if unknown:
        raise Unrenderable(f"keywords {sorted(unknown)}")
    extra = schema.get("additionalProperties")
    if extra is not None and not isinstance(extra, (bool, dict)):
        raise Unrenderable("additionalProperties")


def _properties(schema: Any) -> dict[str, Any]:
    props = schema.get("properties") if isinstance(schema, dict) else None
    if props is not None and not isinstance(props, dict):
        raise Unrenderable("properties")
    return props or {}


def _required(schema: dict[str, Any]) -> set[str]:
    required = schema.get("required") or []
    if not isinstance(required, list):
        raise Unrenderable("required")
    return {str(r) for r in required}


def _nullable(schema: dict[str, Any], kind: str) -> str:
    return f"{kind} | None" if schema.get("nullable") is True and kind != "Any" else kind


def _union(kinds: Any) -> str:
    out: list[str] = []
    for kind in kinds:
        for part in kind.split(" | ") if "[" not in kind else [kind]:
            if part not in out:
                out.append(part)
    if "Any" in out:
        return "Any"
    return " | ".join(out)


def _note(schema: Any) -> str:
    """A parameter's description and constraints, in a few words."""
    if not isinstance(schema, dict):
        return ""
    words = []
    if schema.get("description"):
        words.append(_line(schema["description"]))
    bounds = [
        (">=", schema.get("minimum")),
        (">", schema.get("exclusiveMinimum")),
        ("<=", schema.get("maximum")),
        ("<", schema.get("exclusiveMaximum")),
    ]
    words += [f"{op} {_literal(v)}" for op, v in bounds if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if "multipleOf" in schema:
        words.append(f"multiple of {_literal(schema['multipleOf'])}")
    for low, high, unit in (("minLength", "maxLength", "chars"), ("minItems", "maxItems", "items"),
                            ("minProperties", "maxProperties", "keys")):
        lo, hi = schema.get(low), schema.get(high)
        if lo is not None and hi is not None:
            words.append(f"{lo}..{hi} {unit}")
        elif lo is not None:
            words.append(f">= {lo} {unit}")
        elif hi is not None:
            words.append(f"<= {hi} {unit}")
    if schema.get("uniqueItems"):
        words.append("unique items")
    if "pattern" in schema:
        words.append(f"pattern {_line(schema['pattern'])}")
    if "format" in schema:
        words.append(f"format {_line(schema['format'])}")
    return "; ".join(words)


def _fallback(skill: Skill) -> str:
    doc = [skill.description.strip() or "(no description)", ""]
    doc.append(f"args (JSON Schema): {_json(skill.params)}" if skill.params is not None else "No args.")
    if skill.returns is not None:
        doc.append(f"returns (JSON Schema): {_json(skill.returns)}")
    params, call = ("", f"await ctx.manager.invoke({json.dumps(skill.name)})")
    if skill.params is not None:
        params, call = "**args: Any", f"await ctx.manager.invoke({json.dumps(skill.name)}, args)"
    head = f"async def {function_name(skill.name)}({params}) -> Any:"
    return "\n".join([head, _docstring(doc), f"    return {call}"])


def _docstring(lines: list[str]) -> str:
    """The lines as an indented docstring that is valid Python for any text, and whose
    value is that text: backslashes doubled, quotes that could close it escaped, and
    characters that cannot be in source (NUL, lone surrogates) or could steer a
    terminal written as escapes."""
    body = "\n".join(lines).replace("\\", "\\\\")
    body = _SOURCE_UNSAFE.sub(_escape, body)
    text = "\n".join(f"    {line}" if line else "" for line in body.split("\n")).strip()
    text = _CLOSING_QUOTE.sub('\\\\"', text)  # no quote that could end the docstring early
    if "\n" not in text:
        return f'    """{text}"""'
    return f'    """{text}\n    """'


def _escape(match: re.Match[str]) -> str:
    char = ord(match.group())
    return f"\\x{char:02x}" if char < 0x100 else f"\\u{char:04x}"


def _comment(text: str) -> str:
    """``text`` fit for a ``#`` comment: one line, no character source cannot hold."""
    return _SOURCE_UNSAFE.sub(_escape, _line(text))


def _identifier(key: str) -> bool:
    return key.isidentifier() and not keyword.iskeyword(key)


def _camel(name: str) -> str:
    parts = re.split(r"[^0-9A-Za-z]+", name)
    text = "".join(p[:1].upper() + p[1:] for p in parts if p)
    return text if text and not text[0].isdigit() else f"T{text}"


def _singular(hint: str) -> str:
    """The class name of an array's items: ``FileListEntries`` -> ``FileListEntry``."""
    if hint.endswith("ies"):
        return hint[:-3] + "y"
    if hint.endswith("s") and not hint.endswith("ss"):
        return hint[:-1]
    return hint + "Item"


def _literal_ok(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def _literal(value: Any) -> str:
    """``value`` as Python source (strings in double quotes, as in JSON)."""
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, (int, float, str)):  # JSON's escapes are Python's; it keeps surrogates raw
        return _SOURCE_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(value, ensure_ascii=False))
    if isinstance(value, list):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))}: {_literal(v)}" for k, v in value.items()) + "}"
    raise Unrenderable(f"value {value!r}")


def _line(text: Any) -> str:
    return " ".join(str(text).split())


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=repr)
