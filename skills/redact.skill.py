"""Model-level middleware: mask secrets and e-mail addresses in what is sent to the model.

It wraps each model call of an agent run (``metadata.level: model``) and rewrites the
request before it leaves: the system prompt and every message (text, the code of
earlier tool calls, tool results, summaries). What the model then says, and what the
agent's code does, are untouched: the secrets stay on the host, the model sees only
``[REDACTED SECRET]`` and ``[REDACTED EMAIL]``.

Activate it like any middleware, for every agent (``middleware: [redact]`` in config),
for one skill's agent runs (frontmatter ``"middleware": ["redact"]``) or for one call
(``invoke(..., middleware=["redact"])``); ``redact(emails=false)`` keeps addresses.

Secrets it recognizes: private key blocks, AWS access key ids, GitHub, GitLab, Slack,
Stripe, Google, OpenAI and Anthropic API keys, JSON Web Tokens, bearer tokens,
passwords in URLs, and the value of ``password=``, ``secret:``, ``api_key=``,
``token: ...`` style assignments. It is a safety net, not a guarantee: a secret with
no recognizable shape passes.
"""

import re

frontmatter = {
    "name": "redact",
    "description": "Model middleware: masks secrets (keys, tokens, passwords) and e-mail addresses in everything "
    "sent to the model.",
    "params": {
        "type": "object",
        "properties": {
            "secrets": {"type": "boolean", "default": True, "description": "mask keys, tokens and passwords"},
            "emails": {"type": "boolean", "default": True, "description": "mask e-mail addresses"},
        },
        "additionalProperties": False,
    },
    "metadata": {"role": "middleware", "level": "model", "tags": ["security"]},
}

SECRET = "[REDACTED SECRET]"
EMAIL = "[REDACTED EMAIL]"

# Whole matches are secrets. Every pattern is linear (no nested quantifiers).
_SECRETS = re.compile(
    "|".join(
        [
            r"-----BEGIN [A-Z ]{0,40}PRIVATE KEY-----.*?(?:-----END [A-Z ]{0,40}PRIVATE KEY-----|\Z)",
            r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}\b",
            r"\bgh[pousr]_[A-Za-z0-9]{30,}\b",
            r"\bgithub_pat_[A-Za-z0-9_]{40,}\b",
            r"\bglpat-[A-Za-z0-9_-]{20,}\b",
            r"\bxox[abposr]-[A-Za-z0-9-]{10,}\b",
            r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}\b",
            r"\bAIza[0-9A-Za-z_-]{35}\b",
            r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}\b",
            r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
        ]
    ),
    re.DOTALL,
)
# A secret's name, then its value: the name stays, the value goes.
_ASSIGNED = re.compile(
    r"(?i)(\b(?:password|passwd|pwd|secret|client[_-]?secret|api[_-]?key|access[_-]?key|secret[_-]?key"
    r"|aws_secret_access_key|auth[_-]?token|access[_-]?token|refresh[_-]?token|token)"
    r"[\"']?\s{0,5}[:=]\s{0,5}[\"']?)(?!\[REDACTED)([^\s\"',;&]{6,})"
)
_BEARER = re.compile(r"(?i)(\bbearer\s{1,5})(?!\[REDACTED)([A-Za-z0-9._~+/=-]{12,})")
_URL_PASSWORD = re.compile(r"(\b[a-z][a-z0-9+.-]{1,20}://[^/\s:@]{1,200}:)([^/\s@]{1,200})(@)", re.IGNORECASE)
_EMAIL = re.compile(r"(?<![\w.+-])[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63})*\.[A-Za-z]{2,24}\b")


def redact(text, *, secrets=True, emails=True):
    """``text`` with what looks like a secret or an e-mail address masked."""
    if secrets:
        text = _SECRETS.sub(SECRET, text)
        text = _URL_PASSWORD.sub(lambda m: m.group(1) + SECRET + m.group(3), text)
        text = _ASSIGNED.sub(lambda m: m.group(1) + SECRET, text)
        text = _BEARER.sub(lambda m: m.group(1) + SECRET, text)
    if emails:
        text = _EMAIL.sub(EMAIL, text)
    return text


def _walk(value, options):
    if isinstance(value, str):
        return redact(value, **options)
    if isinstance(value, list):
        return [_walk(item, options) for item in value]
    if isinstance(value, dict):
        return {key: _walk(item, options) for key, item in value.items()}
    return value


async def main(ctx, args):
    call = ctx.target.args  # {"messages": [...], "system": "...", "turn", "attempt"}
    options = {"secrets": args["secrets"], "emails": args["emails"]}
    # ids and roles are not text the model reads as content: leave them as they are
    messages = [
        {key: (value if key in ("role", "tool_call_id", "id") else _walk(value, options)) for key, value in m.items()}
        for m in call["messages"]
    ]
    return await ctx.manager.next({**call, "messages": messages, "system": redact(call["system"], **options)})
