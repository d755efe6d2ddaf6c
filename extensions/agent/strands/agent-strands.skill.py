"""The default agent provider: the Strands Agents loop on Amazon Bedrock.

It builds a Strands model from the cascaded ``model`` config (Bedrock by default;
``model.provider`` picks ``anthropic``, ``openai``, ``ollama`` or ``litellm``), gives it the one
``invoke`` tool, runs the Strands loop and reports every step of it through the hook
protocol of the ``agent`` skill (see ``agent_apps/agent/turns.py``). No business logic
lives here: tool filtering, structured returns and limits are the ``agent`` skill's.

Config keys (``model.*``)::

    provider: bedrock            # bedrock | anthropic | openai | ollama | litellm
    model_id: us.anthropic.claude-sonnet-4-5-20250929-v1:0
    region: us-east-1            # Bedrock: else AWS_REGION, the profile's region, us-west-2
    profile: my-profile          # Bedrock: an AWS profile, else the default credential chain
    endpoint_url: https://...    # Bedrock: a VPC endpoint or a local fake
    base_url: http://localhost:11434      # anthropic/openai/ollama/litellm: the server to talk to
    api_key: ...                 # else the provider's own environment variable
    temperature: 0.2
    max_tokens: 4096
    top_p: 0.9
    streaming: true              # false: one plain request per turn (not abortable mid-call)
    thinking: {budget_tokens: 4096}   # extended thinking, as each provider's reasoning settings
    read_timeout: 60             # seconds a socket read may stall
    connect_timeout: 10          # Bedrock: seconds to connect
    params: {}                   # extra request fields for the model
    prompt_cache: true           # a cache point after the stable prompt prefix (default: where supported)

Each key is declared in ``metadata.config_keys``, so that a config file holding it is
valid while a typo of it is an error.

Strands and boto3 are imported only when this provider runs (``docs/providers.md``).
"""

frontmatter = {
    "name": "agent-strands",
    "description": "Agent provider on Strands Agents: Amazon Bedrock by default, or Anthropic, OpenAI-compatible "
    "servers, Ollama and LiteLLM through model.provider.",
    "params": {
        "type": "object",
        "properties": {
            "prompt": {"type": "string"},
            "config": {"type": "object"},
            "invoke_ref": {"type": "string", "pattern": "^callback://"},
            "hook_ref": {"type": "string", "pattern": "^callback://"},
            "user_message": {"type": "string"},
            "skill_name": {"type": "string"},
            "messages": {"type": "array", "items": {"type": "object"}},
            "model_messages": {"type": "boolean"},
            "buffer_responses": {"type": "boolean"},
            "stable_prefix": {"type": "integer", "minimum": 0},
            "attachments": {"type": "array", "items": {"type": "object"}},
        },
        "required": ["prompt", "invoke_ref", "hook_ref"],
    },
    "metadata": {
        "tags": ["meta-internal", "provider"],
        "visibility": "hidden",
        "provider": {"model_calls": True, "thinking": True},
        # the model.* keys this provider reads beyond the agent's own (so config files may hold them)
        "config_keys": [
            "model.provider",
            "model.profile",
            "model.endpoint_url",
            "model.base_url",
            "model.api_key",
            "model.top_p",
            "model.streaming",
            "model.read_timeout",
            "model.connect_timeout",
            "model.params",
            "model.prompt_cache",
        ],
    },
}


async def main(ctx, args):
    import asyncio

    # Strands, boto3 and OpenTelemetry take a second to import: not on the event loop.
    run = await asyncio.to_thread(_load)
    return await run(ctx, args)


def _load():
    from .models import require_strands

    require_strands()  # a clear error when the 'strands' extra is missing
    from .loop import run

    return run
