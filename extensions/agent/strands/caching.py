"""Prompt caching: a cache point after the system prompt's stable prefix.

The agent policy composes the system prompt from layers, the stable ones first (role,
workspace files, rules, skill stubs), and says where they end (the ``stable_prefix``
arg). Where the model can cache a prompt prefix, the system prompt goes to Strands as
content blocks with a ``cachePoint`` between the stable part and the rest (retrieved
memory, the task), so each later call and run re-reads only what changed.

``model.prompt_cache`` decides: true or false, else automatic: Bedrock models of
Anthropic (Claude) and Amazon (Nova), and Anthropic's own API. OpenAI-compatible
servers and LiteLLM get the plain string (they would drop or refuse the block).
"""

from __future__ import annotations

from typing import Any

__all__ = ["caches_prompts", "system_content"]

_BEDROCK_FAMILIES = ("anthropic.claude", "amazon.nova")


def caches_prompts(provider: str, model_id: str, config: dict[str, Any]) -> bool:
    """Whether to send a cache point to this model."""
    setting = config.get("prompt_cache")
    if isinstance(setting, bool):
        return setting
    if setting is not None:  # declared in metadata.config_keys, which does not check types
        from agent_apps.errors import ConfigError

        raise ConfigError(f"model.prompt_cache must be true or false, not {setting!r}")
    if provider == "anthropic":
        return True
    return provider == "bedrock" and any(family in model_id.lower() for family in _BEDROCK_FAMILIES)


def system_content(prompt: str, stable_prefix: Any, *, provider: str, model_id: str, config: dict[str, Any]) -> Any:
    """The ``system_prompt`` for Strands: ``prompt`` as is, or text blocks around a
    cache point at ``stable_prefix``."""
    if not isinstance(stable_prefix, int) or not 0 < stable_prefix <= len(prompt):
        return prompt
    if not caches_prompts(provider, model_id, config):
        return prompt
    blocks: list[dict[str, Any]] = [{"text": prompt[:stable_prefix]}, {"cachePoint": {"type": "default"}}]
    if stable_prefix < len(prompt):
        blocks.append({"text": prompt[stable_prefix:]})
    return blocks
