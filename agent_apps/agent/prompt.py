"""What the model reads: the system prompt, the tool documentation, run results.

Kept apart from the policy so that it can be read (and tuned) as text. Everything the
model sees about a run is compact on purpose: long outputs cost tokens and attention.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..allowed_tools import Visible
from ..skill import Skill

__all__ = ["INVOKE_TOOL", "cap", "returns_reminder", "system_prompt"]

#: The one tool the model gets: its name, description and JSON Schema.
INVOKE_TOOL: dict[str, Any] = {
    "name": "invoke",
    "description": (
        "Run Python code in a sandbox. Call skills with `await ctx.manager.invoke(name, args)`, "
        "end the task with `ctx.manager.finish(value)`. `print` output and the value of the last "
        "expression are returned. `memory` (a dict) persists between calls."
    ),
    "input_schema": {
        "type": "object",
        "properties": {"code": {"type": "string", "description": "Python source; top-level await works."}},
        "required": ["code"],
        "additionalProperties": False,
    },
}

_HOW_TO = """\
## How you act

You have one tool, `invoke`. Its `code` argument is Python that runs in a sandbox
(no files, network or environment of its own: use the skills). In scope:

- `await ctx.manager.invoke("skill-name", {{...args}})` calls a skill and returns its result.
  Several calls run concurrently with `await asyncio.gather(...)`.
- `ctx.manager.finish(value)` ends the task with `value` as its result.
- `memory` is a dict that keeps its contents between your `invoke` calls{memory_note}.
- `print(...)` output and the value of the last expression come back to you;
  an exception comes back with its traceback, so you can fix the code and retry.
"""

_SERVING = """\
## The call you serve

You are middleware: you wrap one call of the skill `{name}`{description}. In your code
`target` is that call: `target.skill` is its name and `target.args` its args (a dict),
now:

{args}

- `result = await target.manager.next()` runs the call and returns its result
  (`ctx.manager.next()` is the same). To change its args first:
  `result = await target.manager.next({{**target.args, "key": "value"}})`.
  Call it at most once.
- `ctx.manager.finish(value)` makes `value` the call's result: to change the result
  after running it, or to answer without running it.
- If you run the call and do not finish, its own result is returned unchanged; if you
  never run it, your final answer is its result.
"""

_CAP = 12_000  # characters of a run result sent back to the model


def system_prompt(
    prompt: str,
    visible: Visible,
    *,
    returns: Any = None,
    memory_keys: Sequence[str] = (),
    skill_dir: str | None = None,
    serving: tuple[Skill, Any] | None = None,
) -> str:
    """The agent's system prompt: the caller's prompt, then how to act and what to call;
    ``serving`` (skill, args) is the call a middleware-mode agent serves."""
    memory_note = f" (it starts with: {', '.join(sorted(memory_keys))})" if memory_keys else ""
    parts = [prompt.strip(), _HOW_TO.format(memory_note=memory_note)]
    if serving is not None:
        skill, args = serving
        first = skill.description.strip().splitlines()[0] if skill.description.strip() else ""
        parts.append(
            _SERVING.format(name=skill.name, description=f" ({first})" if first else "", args=cap(_json(args)))
        )
    if skill_dir:
        parts.append(
            f"This skill's own files are in `{skill_dir}`: paths in the instructions above are relative to it. "
            "Read them with `file-read` and `file-list` using absolute paths (the folder is read only).\n"
        )
    if visible.mode == "constrained":
        parts.append("## Skills you can call\n\n" + _docs(visible.tools))
    else:
        named = [s for s in visible.named if not s.is_middleware]
        discover = [s for s in visible.tools if s.name in ("skill-list", "skill-describe")]
        text = (
            "## Skills you can call\n\nMore skills exist than are listed here: find them with "
            '`skill-list` (filter with `{"match": "file-*"}`) and read their args with '
            '`skill-describe` (`{"name": ...}`).\n\n'
        )
        parts.append(text + _docs(_unique([*named, *discover])))
    middleware = [m for m in visible.middleware if m.params]
    if middleware:
        parts.append(
            "## Middleware you can activate\n\nMiddleware wraps a call. Activate it for one call with "
            '`await ctx.manager.invoke("skill-name", args, middleware=["name(key=value)"])`.\n\n' + _docs(middleware)
        )
    if returns is not None:
        parts.append(
            "## Your result\n\nEnd by calling `ctx.manager.finish(value)` with a value matching this "
            f"JSON Schema:\n\n{_json(returns)}\n"
        )
    return "\n".join(parts).strip() + "\n"


def returns_reminder(returns: Any) -> str:
    """What the hook says when the model stops without a valid ``finish()``."""
    return (
        "You have not finished. Call the invoke tool with code that ends with "
        f"`ctx.manager.finish(value)`, where value matches this JSON Schema: {_json(returns)}"
    )


def cap(text: str) -> str:
    """Cut what goes back to the model at a size that keeps its context useful."""
    if len(text) <= _CAP:
        return text
    return text[:_CAP] + f"\n[... {len(text) - _CAP} more characters cut]"


def _docs(skills: Sequence[Skill]) -> str:
    blocks = []
    for skill in skills:
        head = f"### {skill.name}\n{skill.description.strip() or '(no description)'}"
        props = (skill.params or {}).get("properties") if skill.params is not None else None
        args = _json(skill.params, indent=None) if props else "no args" if skill.params is None else "{}"
        block = f"{head}\nargs: {args}"
        if skill.returns is not None:
            block += f"\nreturns: {_json(skill.returns, indent=None)}"
        blocks.append(block)
    return "\n\n".join(blocks) + "\n" if blocks else "(none)\n"


def _unique(skills: Sequence[Skill]) -> list[Skill]:
    seen: set[str] = set()
    return [s for s in skills if not (s.name in seen or seen.add(s.name))]  # type: ignore[func-returns-value]


def _json(value: Any, indent: int | None = 2) -> str:
    return json.dumps(value, indent=indent, ensure_ascii=False, default=repr)
