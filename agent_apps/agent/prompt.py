"""What the model reads: the system prompt's built-in layers, the skills as stubs, run
results.

Kept apart from the policy so that it can be read (and tuned) as text. Everything the
model sees about a run is compact on purpose: long outputs cost tokens and attention.
The layers are composed by :class:`~.layers.ContextRegistry`; the workspace files,
retrieved memory and loaded guidance join them in :mod:`.assembly`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..allowed_tools import Visible
from ..skill import Skill
from ..stubs import signature, skill_stub
from .layers import ContextRegistry

__all__ = [
    "INVOKE_TOOL",
    "OFF_THE_RECORD",
    "RULES",
    "SENSITIVE_DATA",
    "cap",
    "guidance_section",
    "prompt_layers",
    "returns_reminder",
    "system_prompt",
]

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

- `await ctx.manager.invoke("skill-name", {...args})` calls a skill and returns its result.
  Several calls run concurrently with `await asyncio.gather(...)`.
- `ctx.manager.finish(value)` ends the task with `value` as its result.
- `memory` is a dict that keeps its contents between your `invoke` calls.
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

#: The behavioural rules (``model.context.rules`` replaces them; ``""`` leaves them out).
#: Lines in brackets hold only when the skill they name is callable.
RULES = """\
## How you work

- Act first, then report: run code to find things out and to do them, rather than
  describing what you would do; then say briefly what you did and what you found.
- Use the most specific skill for each job (file-read to read a file, not shell);
  shell is the last resort.
- When a call is refused (a permission, a limit, a policy), read the reason before you
  try again, and do not repeat the same call unchanged.
- Work that splits into two or more independent parts runs concurrently: several calls
  in one asyncio.gather, or one sub-agent each with the agent skill.
- Keep what you need across calls in the memory dict instead of fetching it again.
[memory-search]- Before you say that you do not know something about the user or earlier work,
[memory-search]  search your memory with the memory-search skill.
[user-file]- When the user tells you a lasting fact about themselves or their preferences,
[user-file]  add it to USER.md in your workspace ({workspace}).
"""

#: How to handle secrets (``model.context.sensitive_data`` replaces it; ``""`` leaves it out).
SENSITIVE_DATA = """\
## Sensitive data

- Tool results may hold credentials: API keys, tokens, passwords, private keys,
  connection strings, cookies. Never repeat one in a message or in your result; refer
  to it ("the key in .env") or show a masked form (the last 4 characters at most).
- Do not write secrets into files, memory, logs or other skills' args unless the task
  is exactly that, and never send one anywhere but where it belongs.
- If you come across a secret you do not need, say so and go on without it.
"""

#: The notice of a run off the record (a session seen read-only; seed 004's OTR notice).
OFF_THE_RECORD = """\
# Off the record

This run is off the record: you see the earlier messages of this conversation, but
nothing of this run is kept in it. Your messages, `memory` and the guidance you load are
forgotten when the run ends, and later runs will not know what happened here. Your
skills work as usual: what they change outside the conversation (files, other systems)
stays changed.
"""

_SKILLS = """\
## Skills you can call

Each skill is a Python stub below: its parameters are the keys of its args, a
parameter with a default (or `= ...`) may be left out, and the stub's body is the call
that runs it. Put the optional args you need into the same dict.
"""

_DISCOVERY = (
    "More skills exist than are listed here: find them with "
    '`skill-list` (filter with `{"match": "file-*"}`) and read their args with '
    '`skill-describe` (`{"name": ...}`), which shows their stubs.\n'
)

_GUIDANCE = """\
## Guidance you can load

Instructions for particular kinds of work. When one fits your task, load it before you
start: `await ctx.manager.invoke("load-skills", {{"skills": [{example}]}})` returns the
full text of each (several names load several) and the files in its folder, which
`file-read` may then read.

{items}
"""

_GUIDANCE_LISTED = 50  # guidance skills named in the prompt at most (skill-list finds the rest)
_CAP = 12_000  # characters of a run result sent back to the model

# Layer priorities: the stable band (below DYNAMIC) first, so prompt caches hold.
ROLE, HOW_TO, RULES_AT, SENSITIVE_AT, FOLDER, SKILLS_AT, MIDDLEWARE, GUIDANCE_AT, RESULT = (
    10, 50, 55, 60, 65, 70, 75, 80, 90
)
CONTEXT, OFF_RECORD, LOADED, SERVING, TASK, MEMORY = 100, 105, 110, 120, 130, 140


def prompt_layers(
    prompt: str,
    visible: Visible,
    *,
    returns: Any = None,
    memory_keys: Sequence[str] = (),
    skill_dir: str | None = None,
    serving: tuple[Skill, Any] | None = None,
    rules: str | None = None,
    sensitive_data: str | None = None,
    workspace: str | None = None,
) -> ContextRegistry:
    """The built-in layers: the caller's prompt (the role), how to act, the rules, the
    skills it can call as stubs, the guidance it can load, the result it owes; then the
    dynamic ones (the call it serves, what ``memory`` starts with).

    ``rules`` and ``sensitive_data`` replace the default sections (``""`` leaves one
    out); ``serving`` (skill, args) is the call a middleware-mode agent serves."""
    registry = ContextRegistry()
    add = registry.add
    callable_skills = [s for s in visible.tools if not s.guidance]
    guidance = [s for s in visible.tools if s.guidance]
    names = {s.name for s in callable_skills}
    add("role", prompt.strip(), priority=ROLE)
    add("how-to-act", _HOW_TO, priority=HOW_TO)
    add("rules", _rules(names, workspace) if rules is None else rules, priority=RULES_AT)
    add("sensitive-data", SENSITIVE_DATA if sensitive_data is None else sensitive_data, priority=SENSITIVE_AT)
    if skill_dir:
        add(
            "skill-folder",
            f"This skill's own files are in `{skill_dir}`: paths in the instructions above are relative to it. "
            "Read them with `file-read` and `file-list` using absolute paths (the folder is read only).",
            priority=FOLDER,
        )
    if visible.mode == "constrained":
        shown, head = callable_skills, _SKILLS
    else:
        named = [s for s in visible.named if not s.is_middleware and not s.guidance]
        discover = [s for s in callable_skills if s.name in ("skill-list", "skill-describe")]
        shown, head = _unique([*named, *discover]), _SKILLS + "\n" + _DISCOVERY
    add("skills", head + "\n" + _stubs(shown), priority=SKILLS_AT)
    middleware = [m for m in visible.middleware if m.params]
    if middleware:
        add(
            "middleware",
            "## Middleware you can activate\n\nMiddleware wraps a call. Activate it for one call with "
            '`await ctx.manager.invoke("skill-name", args, middleware=["name(key=value)"])`.\n\n'
            + "\n".join(f"- `{signature(m)}`: {_first_line(m.description)}" for m in middleware),
            priority=MIDDLEWARE,
        )
    if guidance:
        add("guidance", guidance_section(guidance), priority=GUIDANCE_AT)
    if returns is not None:
        add(
            "result",
            "## Your result\n\nEnd by calling `ctx.manager.finish(value)` with a value matching this "
            f"JSON Schema:\n\n{_json(returns)}",
            priority=RESULT,
        )
    if serving is not None:
        skill, args = serving
        first = _first_line(skill.description)
        add(
            "serving",
            _SERVING.format(name=skill.name, description=f" ({first})" if first else "", args=cap(_json(args))),
            priority=SERVING,
            stable=False,
        )
    if memory_keys:
        keys = ", ".join(sorted(memory_keys))
        add("task", f"Your memory dict starts with these keys: {keys}.", priority=TASK, stable=False)
    return registry


def system_prompt(prompt: str, visible: Visible, **options: Any) -> str:
    """The composed system prompt of :func:`prompt_layers` (without workspace files,
    memory or loaded guidance, which :mod:`.assembly` adds for an agent run)."""
    return prompt_layers(prompt, visible, **options).compose().text


def guidance_section(guidance: Sequence[Skill]) -> str:
    """Guidance skills by name and description, and how to load them."""
    listed = guidance[:_GUIDANCE_LISTED]
    items = "\n".join(f"- {s.name}: {_first_line(s.description) or '(no description)'}" for s in listed)
    if len(guidance) > len(listed):
        items += f"\n- ... and {len(guidance) - len(listed)} more: skill-list shows them, marked (guidance)"
    return _GUIDANCE.format(example=json.dumps(listed[0].name), items=items)


def _rules(callable_names: set[str], workspace: str | None) -> str:
    """The default rules, with the lines about skills the agent cannot call left out."""
    writes = bool({"file-write", "file-edit"} & callable_names)
    keep = {"memory-search": workspace is not None and "memory-search" in callable_names,
            "user-file": workspace is not None and writes}
    lines = []
    for line in RULES.splitlines():
        tag, sep, rest = line.partition("]") if line.startswith("[") else ("", "", line)
        if sep and not keep.get(tag[1:], False):
            continue
        lines.append(rest)
    return "\n".join(lines).format(workspace=workspace)


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


def _stubs(skills: Sequence[Skill]) -> str:
    if not skills:
        return "(none)\n"
    return "```python\n" + "\n\n".join(skill_stub(s) for s in skills) + "\n```\n"


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def _unique(skills: Sequence[Skill]) -> list[Skill]:
    seen: set[str] = set()
    return [s for s in skills if not (s.name in seen or seen.add(s.name))]  # type: ignore[func-returns-value]


def _json(value: Any, indent: int | None = 2) -> str:
    return json.dumps(value, indent=indent, ensure_ascii=False, default=repr)
