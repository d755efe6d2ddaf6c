"""Red-team suite: hostile agent code against the host, through the whole pipeline.

Agent code is the attacker: it hands schemas, configs and values to sub-agents and
tools. Each attempt asserts that the host refused it with a clear error the model
can read, that nothing outside happened (no request, no file read), and that the
process kept working.
"""

from __future__ import annotations

import http.server
import json
import threading

import pytest

pytestmark = pytest.mark.anyio


def scripted(*turns, **extra):
    return {"agent": "agent-scripted", "script": list(turns), **extra}


async def run_code(cm, code, *, config=None, **args):
    """Run ``code`` as an agent's one turn; returns (result, every tool result and error
    of it and its sub-agents)."""
    events = []
    cm.events.subscribe("rt", lambda topic, e: events.append(e))
    call = {"prompt": "Test.", "user_message": "Go.", "events": "rt", "name": "outer", **args}
    call["config"] = {**scripted({"code": code}, {"text": "done"}), **(config or {})}
    result = await cm.invoke("agent", call)
    outputs = [e["result"] for e in events if e["type"] in ("tool-result", "tool-error")]
    return result, outputs


def sub_agent(code: str, *, turns: list | None = None, **call) -> str:
    """Agent code that starts a scripted sub-agent running ``code`` (or playing
    ``turns``) and finishes with its result, or with the error it raised."""
    args = {"prompt": "p", "name": "sub", **call}
    config = args.setdefault("config", {})
    config.update(scripted(*(turns or [{"code": code}, {"text": "sub done"}])))
    return (
        "try:\n"
        f"    r = await ctx.manager.invoke('agent', {args!r})\n"
        "except HostError as e:\n"
        "    r = f'{e.type}: {e}'\n"
        "ctx.manager.finish(r)"
    )


@pytest.fixture
def listener():
    """A local HTTP server that records every request it gets."""
    seen = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            seen.append(self.path)
            body = json.dumps({"type": "string"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


# -- 1. schemas from agent code are data, never instructions to fetch ------------------------


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "{url}/schema.json"},
        {"$ref": "file://{creds}"},
        {"$ref": "creds.json"},
        {"$dynamicRef": "{url}/dyn"},
        {"$id": "{url}/base.json", "$ref": "other.json"},
        {"type": "object", "properties": {"a": {"$ref": "file://{creds}"}}},
        {"anyOf": [{"type": "integer"}, {"$ref": "{url}/late.json"}]},
    ],
    ids=["http", "file", "relative", "dynamic-ref", "id-base", "nested", "only-on-failure"],
)
async def test_returns_schema_never_fetches(context_manager, listener, tmp_path, schema):
    url, seen = listener
    creds = tmp_path / "creds.json"
    creds.write_text(json.dumps({"type": "string", "const": "SECRET-TOKEN-123"}))
    returns = json.loads(json.dumps(schema).replace("{url}", url).replace("{creds}", str(creds)))
    result, _ = await run_code(context_manager, sub_agent("ctx.manager.finish('x')", returns=returns))
    assert result.startswith("ArgsInvalid") and "outside the schema" in result, result
    assert "never fetches" in result and "SECRET" not in result
    assert seen == []


async def test_schemas_still_resolve_their_own_definitions(context_manager):
    returns = {"$defs": {"n": {"type": "integer", "minimum": 3}}, "$ref": "#/$defs/n"}
    result, _ = await run_code(context_manager, sub_agent("ctx.manager.finish(5)", returns=returns))
    assert result == 5


async def test_skill_file_schema_with_a_remote_ref_is_a_load_error(context_manager, write_skill, listener):
    from agent_apps import SkillLoadError

    url, seen = listener
    path = write_skill(
        "remote-ref",
        f'frontmatter = {{"params": {{"type": "object", "properties": {{"a": {{"$ref": "{url}/a"}}}}}}}}\n'
        "async def main(ctx, args):\n    return 1\n",
    )
    with pytest.raises(SkillLoadError, match="outside the schema") as info:
        await context_manager.invoke("remote-ref", {"a": 1})
    assert str(path) in str(info.value) and seen == []


# -- 2. no regex (or schema) can hang the host -------------------------------------------------

HANGING_SCHEMAS = {
    "catastrophic-pattern": ({"type": "string", "pattern": "^(a+)+$"}, "'a' * 40 + '!'", "does not match"),
    "catastrophic-alternation": ({"type": "string", "pattern": "^(a|aa)+$"}, "'a' * 60 + '!'", "does not match"),
    "pattern-property-key": (
        {"type": "object", "patternProperties": {"^(a+)+$": {}}, "additionalProperties": False},
        "{'a' * 40 + '!': 1}",
        "do not match any of the regexes",
    ),
    "pattern-in-property-names": (
        {"type": "object", "propertyNames": {"pattern": "^(\\w+\\s?)*$"}},
        "{'a' * 5000 + '!': 1}",
        "does not match",
    ),
    # a long value: the model's text is cut before the reason, so only the outcome is checked
    "unique-items-quadratic": ({"type": "array", "uniqueItems": True}, "[{'a': i} for i in range(30_000)] + [{'a': 0}]",
                               None),
}


@pytest.mark.parametrize("name", sorted(HANGING_SCHEMAS))
async def test_hostile_schemas_and_values_are_bounded(context_manager, name):
    schema, value, words = HANGING_SCHEMAS[name]
    result, outputs = await run_code(
        context_manager, sub_agent(f"ctx.manager.finish({value})", returns=schema, config={"max_turns": 2})
    )
    assert result == (
        "LimitExceeded: sub: Stopped: maximum turn limit reached (2 turns) before a valid ctx.manager.finish() value"
    ), result  # the value was never accepted
    assert words is None or any(words in o for o in outputs if "finish() rejected" in o), outputs


async def test_exploding_schema_is_stopped_by_the_time_limit(context_manager, monkeypatch):
    from agent_apps import _schema

    monkeypatch.setattr(_schema, "TIME_LIMIT", 0.3)
    defs = {f"d{i}": {"anyOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"$ref": f"#/$defs/d{i + 1}", "minLength": 1}]}
            for i in range(30)}
    defs["d30"] = {"type": "integer"}
    returns = {"$defs": defs, "$ref": "#/$defs/d0"}
    result, outputs = await run_code(
        context_manager, sub_agent("ctx.manager.finish('x')", returns=returns, config={"max_turns": 2})
    )
    assert result == (
        "LimitExceeded: sub: Stopped: maximum turn limit reached (2 turns) before a valid ctx.manager.finish() value"
    ), result
    assert any("finish() rejected" in o and "took longer than 0.3 s" in o for o in outputs), outputs


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        ({"type": "string", "pattern": "(?=a)a"}, "is not a 'regex'"),
        ({"type": "string", "pattern": "((((a{100}){100}){100}){100})"}, "is not a 'regex'"),
        ({"type": "object", "patternProperties": {"(a)\\1": {}}}, "is not a 'regex'"),
        ({"patternProperties": {"^a": {}}, "unevaluatedProperties": False}, "not supported"),
    ],
    ids=["lookahead", "compile-bomb", "backreference", "unevaluated-with-patterns"],
)
async def test_unbounded_schema_features_are_refused_clearly(context_manager, schema, words):
    result, _ = await run_code(context_manager, sub_agent("ctx.manager.finish('a')", returns=schema))
    assert result.startswith("ArgsInvalid") and words in result, result


async def test_self_referencing_schema_is_an_error_not_a_crash(context_manager):
    result, outputs = await run_code(
        context_manager, sub_agent("ctx.manager.finish(1)", returns={"$ref": "#"}, config={"max_turns": 2})
    )
    assert result == (
        "LimitExceeded: sub: Stopped: maximum turn limit reached (2 turns) before a valid ctx.manager.finish() value"
    ), result
    assert any("finish() rejected" in o and "recursed too deeply" in o for o in outputs), outputs


async def test_deep_schemas_within_the_json_bound_still_work(context_manager):
    code = sub_agent("ctx.manager.finish(1)", returns="DEEP").replace(
        "'DEEP'", "json.loads('{\"properties\": {\"a\": ' * 63 + '{}' + '}}' * 63)"
    )
    result, _ = await run_code(context_manager, "import json\n" + code)
    assert result == 1


async def test_skill_list_match_is_bounded(context_manager):
    code = "await ctx.manager.invoke('skill-list', {'match': '*a' * 150_000})"
    result, outputs = await run_code(context_manager, code)
    assert any("ArgsInvalid" in o and "match" in o for o in outputs), outputs


# -- 3. sub-agents inherit the caller's limits; the tree has budgets ----------------------------


async def test_sub_agent_cannot_get_more_memory_than_its_caller(context_manager):
    code = sub_agent("x = bytearray(150 * 2**20)\nctx.manager.finish(len(x))", config={"sandbox": {"memory_mb": 1024}})
    result, outputs = await run_code(context_manager, code, config={"sandbox": {"memory_mb": 64}})
    assert result == "sub done" and any("MemoryError" in o for o in outputs), outputs


async def test_sub_agent_cannot_make_more_calls_than_its_caller(context_manager):
    many = "for i in range(40):\n    await ctx.manager.invoke('skill-list', {'tag': 'none'})\nctx.manager.finish(i)"
    result, outputs = await run_code(context_manager, sub_agent(many), config={"sandbox": {"max_calls": 5}})
    assert result == "sub done" and any("too many ctx.manager.invoke() calls" in o and "limit 5" in o for o in outputs)


async def test_sub_agent_cannot_take_more_steps_than_its_caller(context_manager):
    code = sub_agent("", turns=[{"code": "1"}] * 6, config={"max_steps": 50})
    result, _ = await run_code(context_manager, code, config={"max_steps": 2})
    assert result.startswith("Stopped: maximum step limit reached"), result  # 2 steps, not 50


def fan_out(n: int, code: str) -> str:
    """Agent code that starts ``n`` sub-agents at once; finishes with their outcomes."""
    sub = {"prompt": "p", "config": scripted({"code": code}, {"text": "sub done"})}
    return (
        "async def one(i):\n"
        "    try:\n"
        f"        return await ctx.manager.invoke('agent', {{**{sub!r}, 'name': f'sub{{i}}'}})\n"
        "    except HostError as e:\n"
        "        return f'{e.type}: {e}'\n"
        f"ctx.manager.finish(await asyncio.gather(*(one(i) for i in range({n}))))"
    )


async def test_the_tree_has_a_spawn_budget(context_manager):
    code = fan_out(4, "ctx.manager.finish(1)")
    result, _ = await run_code(context_manager, code, config={"spawn": {"max_agents": 3}})
    refused = [r for r in result if r != 1]
    assert result.count(1) == 2 and len(refused) == 2, result  # the outer agent counts too
    assert all(r.startswith("BudgetExceeded") and "model.spawn.max_agents = 3" in r for r in refused)


async def test_sub_agents_starting_sub_agents_stay_within_the_budget(context_manager):
    """The issue's attack: 8 sub-agents each starting 8 more."""
    inner = fan_out(8, "x = bytearray(40 * 2**20)\nctx.manager.finish(1)")
    result, _ = await run_code(context_manager, fan_out(8, inner), config={"spawn": {"max_agents": 10}})
    leaves = [leaf for r in result for leaf in (r if isinstance(r, list) else [r])]
    assert sum(leaf == 1 for leaf in leaves) <= 8, result  # 10 agents at most: the outer one, 1+ subs, the rest
    assert all(leaf == 1 or leaf.startswith("BudgetExceeded") for leaf in leaves), result


async def test_the_tree_has_a_depth_budget(context_manager):
    inner = sub_agent("ctx.manager.finish('deepest')")
    result, _ = await run_code(context_manager, sub_agent(inner), config={"spawn": {"max_depth": 1}})
    assert result.startswith("BudgetExceeded") and "model.spawn.max_depth = 1" in result, result


async def test_the_tree_has_a_memory_budget(context_manager):
    config = {"sandbox": {"memory_mb": 64}, "spawn": {"max_memory_mb": 200}}
    result, _ = await run_code(context_manager, fan_out(3, "await asyncio.sleep(1)\nctx.manager.finish(1)"),
                               config=config)
    refused = [r for r in result if r != 1]
    assert result.count(1) == 2 and len(refused) == 1, result  # 64 (outer) + 2 x 64 fit in 200, a third does not
    assert "spawn.max_memory_mb" in refused[0] and "smaller sandbox.memory_mb" in refused[0]
    # ...and a sub-agent asking for less fits
    small = fan_out(3, "await asyncio.sleep(1)\nctx.manager.finish(1)").replace(
        "'config': {", "'config': {'sandbox': {'memory_mb': 64}, ", 1
    )
    config["spawn"]["max_memory_mb"] = 256
    result, _ = await run_code(context_manager, small, config=config)
    assert result == [1, 1, 1], result


async def test_top_level_spawn_config_is_checked(context_manager):
    from agent_apps import ConfigError

    with pytest.raises(ConfigError, match="model.spawn.max_agents must be a whole number > 0"):
        await run_code(context_manager, "1", config={"spawn": {"max_agents": 0}})


PROMPT_SKILL_ASKING_FOR_MORE = """
---
description: Wants more than its caller has.
metadata:
  model:
    agent: agent-scripted
    sandbox: {memory_mb: 1024, max_calls: 1000}
    spawn: {max_agents: 1000, max_depth: 100, max_memory_mb: 100000}
    script:
      - code: |
          x = bytearray(150 * 2**20)
          ctx.manager.finish(len(x))
      - text: gave up
---
Allocate.
"""


async def test_a_prompt_skill_below_an_agent_gets_no_more_than_it(context_manager, write_skill):
    """The neighbour of the sub-agent attack: a prompt skill's own config asks for more."""
    write_skill("greedy.skill.md", PROMPT_SKILL_ASKING_FOR_MORE.lstrip())
    code = "try:\n    r = await ctx.manager.invoke('greedy')\nexcept HostError as e:\n    r = str(e)\n"
    code += "ctx.manager.finish(r)"
    result, outputs = await run_code(context_manager, code, config={"sandbox": {"memory_mb": 64}})
    assert result == "gave up" and any("MemoryError" in o for o in outputs), (result, outputs)
    # its spawn config does not widen the tree's budget either
    code = "async def one():\n    try:\n        return await ctx.manager.invoke('greedy')\n    except HostError as e:\n"
    code += "        return str(e)\nctx.manager.finish(await asyncio.gather(one(), one(), one()))"
    result, _ = await run_code(context_manager, code, config={"spawn": {"max_agents": 2}})
    assert sum("model.spawn.max_agents = 2" in str(r) for r in result) == 2, result


async def test_agent_code_may_not_set_the_spawn_budget(context_manager):
    result, _ = await run_code(context_manager, sub_agent("1", config={"spawn": {"max_agents": 1000}}))
    assert result.startswith("ToolNotAllowed") and "may not set config spawn" in result, result
