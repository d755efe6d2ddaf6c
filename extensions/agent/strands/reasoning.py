"""``model.thinking: {budget_tokens: N}`` as each provider's reasoning settings.

=============  ==========================================================================
provider       what is sent
=============  ==========================================================================
bedrock        ``additionalModelRequestFields.thinking: {type: enabled, budget_tokens: N}``
anthropic      ``thinking: {type: enabled, budget_tokens: N}``
openai         ``reasoning_effort``: ``low`` below 2048, ``medium`` below 4096, else
               ``high`` (LiteLLM's budgets for the three, read backwards); only to
               models that take it (:data:`EFFORT_MODELS`), else a warning, once
litellm        ``thinking: {type: enabled, budget_tokens: N}`` where LiteLLM takes it for
               the model (Anthropic, Bedrock, vLLM...), else ``reasoning_effort`` as for
               openai where it takes that (OpenAI's reasoning models, Ollama...), else
               nothing and a warning, once per model
ollama         ``think: true`` (Ollama takes no budget)
=============  ==========================================================================

Anthropic's API wants ``max_tokens`` above the budget: where it is not, or is unset,
the budget is added to it (to :data:`~.models.DEFAULT_MAX_TOKENS` when unset), so the
answer keeps room beside the thinking.
"""

from __future__ import annotations

import re
from typing import Any

from agent_apps.agent.settings import warn_once

__all__ = ["EFFORT_MODELS", "budget", "effort", "enabled", "litellm", "max_tokens_above"]

#: OpenAI's reasoning models, which take ``reasoning_effort`` (o1, o3, o4-mini, gpt-5...).
EFFORT_MODELS = re.compile(r"^(?:.*/)?(?:o\d|gpt-5)")


def budget(config: dict[str, Any]) -> int | None:
    """``model.thinking.budget_tokens`` (checked by the ``agent`` skill), or None."""
    thinking = config.get("thinking") or {}
    value = thinking.get("budget_tokens")
    return int(value) if value else None


def enabled(tokens: int) -> dict[str, Any]:
    """Anthropic's extended thinking (Bedrock's and LiteLLM's too) for a budget."""
    return {"type": "enabled", "budget_tokens": tokens}


def max_tokens_above(config: dict[str, Any], tokens: int, default: int) -> int:
    """``model.max_tokens`` when above the budget, else it (or ``default`` when unset)
    plus the budget."""
    limit = int(config.get("max_tokens") or 0)
    return limit if limit > tokens else (limit or default) + tokens


def effort(model_id: str, tokens: int) -> str | None:
    """OpenAI's ``reasoning_effort`` for a budget, or None (with a warning, once per
    model) for a model that takes none."""
    if not EFFORT_MODELS.match(model_id):
        _ignored("openai", model_id, "takes no reasoning_effort")
        return None
    return _effort(tokens)


def litellm(model_id: str, tokens: int, api_base: str | None) -> dict[str, Any]:
    """LiteLLM's reasoning parameter for the model, as LiteLLM says the model takes it
    (it refuses a parameter the model does not take)."""
    import litellm as lib

    try:
        model, provider, _, _ = lib.get_llm_provider(model_id, api_base=api_base)
        taken = lib.get_supported_openai_params(model=model, custom_llm_provider=provider) or []
    except Exception:  # LiteLLM does not know the model: its own call will say so
        taken = []
    if "thinking" in taken:
        return {"thinking": enabled(tokens)}
    if "reasoning_effort" in taken:
        return {"reasoning_effort": _effort(tokens)}
    _ignored("litellm", model_id, "takes neither thinking nor reasoning_effort")
    return {}


def _effort(tokens: int) -> str:
    return "low" if tokens < 2048 else "medium" if tokens < 4096 else "high"


def _ignored(provider: str, model_id: str, why: str) -> None:
    warn_once(
        ("thinking", provider, model_id),
        "model.thinking is ignored: provider %r model %r %s (model.params may still set the model's own)",
        provider,
        model_id,
        why,
    )
