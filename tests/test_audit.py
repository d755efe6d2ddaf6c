"""The bundled ``audit`` middleware: one JSON line per invocation, where config says."""

from __future__ import annotations

import asyncio
import json

import pytest

from agent_apps import ContextManager, SkillFailed

pytestmark = pytest.mark.anyio

SKILLS = {
    "outer": """
        frontmatter = {
            "params": {"type": "object", "properties": {"api_key": {"type": "string"}, "n": {"type": "integer"}}},
        }
        async def main(ctx, args):
            return await ctx.manager.invoke("inner", {"text": "x" * 500})
    """,
    "inner": """
        frontmatter = {"params": {"type": "object", "properties": {"text": {"type": "string"}}}}
        async def main(ctx, args):
            return len(args["text"])
    """,
    "broken": """
        frontmatter = {}
        async def main(ctx, args):
            raise ValueError("no luck")
    """,
}


@pytest.fixture
def project(tmp_path, write_skill):
    for name, source in SKILLS.items():
        write_skill(name, source)
    project = tmp_path / "project"
    project.mkdir()
    return project


def manager(project, skills_path, config):
    (project / "agent-apps.yaml").write_text(config)
    return ContextManager([skills_path], cwd=project, home=project / "home", env=False, user=False, entry_points=False)


def lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_every_invocation_is_one_line_with_caller_args_duration_and_outcome(project, skills_path):
    cm = manager(project, skills_path, "middleware: [audit(args_chars=40)]\naudit: {file: logs/audit.jsonl}\n")
    assert await cm.invoke("outer", {"api_key": "sk-secret", "n": 2}) == 500
    with pytest.raises(SkillFailed):
        await cm.invoke("broken")
    inner, outer, broken = lines(project / "logs" / "audit.jsonl")
    assert (inner["skill"], inner["caller"], inner["caller_id"], inner["depth"]) == ("inner", "outer", outer["id"], 1)
    assert inner["args"] == '{"text": "' + "x" * 30 + "…" and inner["ok"] is True
    assert outer["args"] == '{"api_key": "***", "n": 2}' and outer["caller"] is None and outer["run"] is None
    assert broken["ok"] is False and broken["error"] == {
        "type": "SkillFailed",
        "message": "broken failed: ValueError: no luck",
    }
    assert all(isinstance(r["duration_ms"], float) and r["time"].endswith("+00:00") for r in (inner, outer, broken))
    assert (project / "logs" / "audit.jsonl").stat().st_mode & 0o777 == 0o600


async def test_calls_from_agent_code_carry_the_run(project, skills_path, write_skill):
    write_skill(
        "runner.skill.md",
        """
        ---
        description: Runs inner from agent code.
        metadata:
          model:
            agent: agent-scripted
            script: [{code: "ctx.manager.finish(await ctx.manager.invoke('inner', {'text': 'abc'}))"}]
        ---
        Go.
        """,
    )
    cm = manager(project, skills_path, "middleware: [audit]\n")
    assert await cm.invoke("runner") == 3
    records = {r["skill"]: r for r in lines(project / "home" / "audit.jsonl")}  # the default file
    runner, inner = records["runner"], records["inner"]
    assert inner["caller"] == "agent-code" and inner["run"] == runner["id"]


async def test_level_error_and_stderr(project, skills_path, capfd):
    cm = manager(project, skills_path, "middleware: ['audit(level=error)']\naudit: {file: '-'}\n")
    await cm.invoke("inner", {"text": "a"})
    with pytest.raises(SkillFailed):
        await cm.invoke("broken")
    (line,) = capfd.readouterr().err.splitlines()
    assert json.loads(line)["skill"] == "broken"


async def test_concurrent_lines_stay_whole(project, skills_path):
    cm = manager(project, skills_path, "middleware: [audit]\n")
    await asyncio.gather(*(cm.invoke("inner", {"text": "y" * i}) for i in range(200)))
    assert sorted(len(json.loads(r["args"])["text"]) for r in lines(project / "home" / "audit.jsonl")) == list(
        range(200)
    )


async def test_a_typo_in_its_config_is_caught(project, skills_path):
    from agent_apps import ConfigError

    cm = manager(project, skills_path, "middleware: [audit]\naudit: {fiel: x.jsonl}\n")
    with pytest.raises(ConfigError, match=r"unknown config key 'audit.fiel' \(did you mean 'audit.file'\?\)"):
        await cm.invoke("inner", {"text": "a"})
