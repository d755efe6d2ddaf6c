"""The Skill's own facts: its naming rules (skill.py)."""

from __future__ import annotations

from agent_apps.skill import mounted_tool_name


def test_names_are_normalized():
    assert mounted_tool_name("helper", "shoutText") == "helper-shout-text"
    assert mounted_tool_name("My Server", "read_file") == "my-server-read-file"
