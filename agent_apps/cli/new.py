"""``agent-apps new skill NAME``: a working skill file and a test for it, from a template
(imported only for it).

The skill runs as written (``agent-apps invoke NAME text="..."``) and its test passes
(``python -m pytest tests/test_NAME.py``); both are starting points to make one's own.
A prompt skill (``--prompt``) plays the bundled scripted model, so it runs offline; its
comments say how to give it a real one.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from . import EXIT_OK, UsageError, _Parser

if TYPE_CHECKING:
    from . import _Subparsers

CODE = '''\
"""{name}: count the words of a text (a new skill, from `agent-apps new skill`: make it yours)."""

frontmatter = {{
    # What agents read to choose a skill, and `agent-apps list` shows: one line.
    "description": "Count the words of a text.",
    # The args, as a JSON Schema: they are checked before main runs.
    "params": {{
        "type": "object",
        "properties": {{"text": {{"type": "string", "description": "the text to count"}}}},
        "required": ["text"],
    }},
    # The result, checked after main returns.
    "metadata": {{
        "returns": {{"type": "object", "properties": {{"words": {{"type": "integer"}}}}, "required": ["words"]}},
    }},
}}


async def main(ctx, args):
    return {{"words": len(args["text"].split())}}
'''

PROMPT = '''\
---
description: Say what a text is about, in a few words (a new prompt skill, from `agent-apps new skill --prompt`).
params:
  type: object
  properties:
    text: {{type: string, description: the text to read}}
  required: [text]
metadata:
  returns:
    type: object
    properties: {{words: {{type: integer}}, gist: {{type: string}}}}
    required: [words, gist]
  model:
    # Offline, the bundled scripted model plays these turns. For a real model, set
    # agent: agent-strands (Amazon Bedrock; docs/providers.md has the others) and
    # delete the script: the model then writes the code itself.
    agent: agent-scripted
    script:
      - text: "Reading the text."
        code: |
          words = memory["args"]["text"].split()
          ctx.manager.finish({{"words": len(words), "gist": " ".join(words[:5])}})
---
You read the text in your args and say what it is about. Finish with
ctx.manager.finish({{"words": <how many words>, "gist": <a few words>}}).
'''

TEST = '''\
"""The {name} skill (from `agent-apps new skill`). Run: python -m pytest {test_path}"""

from pathlib import Path

from agent_apps.testing.plugin import hermetic_manager

SKILLS = Path(__file__).resolve().parent / {skills!r}


def test_{ident}(tmp_path):
    # the skills folder and agent-apps' bundled skills, nothing of your home or config
    cm = hermetic_manager([SKILLS], tmp_path)
    assert cm.invoke_sync("{name}", {{"text": "an old silent pond"}}) == {expected}
'''


def cmd_new_skill(args: argparse.Namespace) -> int:
    from ..skill import is_skill_name

    if not is_skill_name(args.name):
        raise UsageError(f"{args.name!r} is not a skill name: lowercase letters, digits and '-' (word-count)")
    skills, tests = Path(args.dir), Path(args.tests)
    skill_path = skills / (f"{args.name}.skill.md" if args.prompt else f"{args.name}.skill.py")
    ident = args.name.replace("-", "_")
    test_path = tests / f"test_{ident}.py"
    for path in (skill_path, test_path):
        if path.exists() and not args.force:
            raise UsageError(f"{path} exists: choose another name, or --force to write over it")
    expected = '{"words": 4, "gist": "an old silent pond"}' if args.prompt else '{"words": 4}'
    skill_text = (PROMPT if args.prompt else CODE).format(name=args.name)
    test_text = TEST.format(
        name=args.name,
        ident=ident,
        test_path=test_path,
        skills=os.path.relpath(skills.resolve(), tests.resolve()),
        expected=expected,
    )
    for path, text in ((skill_path, skill_text), (test_path, test_text)):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
    where = "" if skills.resolve() == (Path.cwd() / "skills").resolve() else f" --path {skills}"
    print(
        f"try it: agent-apps invoke {args.name}{where} text=\"an old silent pond\"; "
        f"test it: python -m pytest {test_path}",
        file=sys.stderr,
    )
    return EXIT_OK


def _new_parser(sub: _Subparsers, common: _Parser) -> None:
    p = sub.add_parser("new", help="start a new skill (and its test) from a template")
    kinds = p.add_subparsers(dest="new_command", metavar="KIND", required=True)
    p = kinds.add_parser(
        "skill", parents=[common], help="write a working skill file and a test for it",
        description="Write NAME.skill.py (or, with --prompt, NAME.skill.md: a prompt skill the scripted model "
        "plays offline) into --dir, and a pytest test of it into --tests; both run as written.",
    )
    p.add_argument("name", metavar="NAME", help="the skill's name: lowercase letters, digits and '-'")
    p.add_argument("--prompt", action="store_true", help="a prompt skill (Markdown, run by the agent)")
    p.add_argument("--dir", default="skills", metavar="DIR", help="where the skill goes (default: ./skills)")
    p.add_argument("--tests", default="tests", metavar="DIR", help="where its test goes (default: ./tests)")
    p.add_argument("--force", action="store_true", help="write over files that exist")
    p.set_defaults(run=cmd_new_skill)
