"""The offline provider: plays a fixed script through the real provider protocol.

Each script entry is one model turn::

    - text: "Let me count."        # what the model says (optional)
      reasoning: "..."              # extended thinking (optional)
      code: |                       # one invoke call; a list gives several in one turn
        ctx.manager.finish(42)
      delay: 0.5                    # seconds the "model" takes (cancellable)
      usage: {input_tokens: 10, output_tokens: 3}   # else estimated, 4 characters a token
    - error: {type: ThrottlingException, message: "slow down", retryable: true}
                                    # this model call fails; the hook decides retry or stop

With ``config.stream: true`` text arrives as ``message`` deltas, as from a streaming
model. ``messages`` (a session's earlier messages, in the neutral format) come before
the user's message in the conversation it keeps, and count in its usage estimate; the
script alone decides what the "model" says. When compaction has the model summarize,
``model.compaction.model.script`` plays that call (its first turn's text is the answer).
It is a complete provider: tests, docs and demos use it, and the provider
conformance suite holds it to the same protocol as a real model.
"""

import asyncio
import json
import secrets
import time

frontmatter = {
    "name": "agent-scripted",
    "description": "Offline agent provider that replays a scripted model (config.script).",
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
        },
        "required": ["prompt", "invoke_ref", "hook_ref"],
    },
    "metadata": {"tags": ["meta-internal", "provider"], "visibility": "hidden"},
}


class ModelError(Exception):
    """The scripted model call failed (an ``error`` entry the hook did not retry)."""


async def main(ctx, args):
    config = args.get("config") or {}
    script = list(config.get("script") or [])
    hook_ref, invoke_ref = args["hook_ref"], args["invoke_ref"]

    async def hook(event):
        return await ctx.manager.invoke(hook_ref, event) or {}

    conversation = [{"role": "system", "content": args["prompt"]}]
    conversation += [_from_history(m) for m in args.get("messages") or ()]
    conversation.append({"role": "user", "content": args.get("user_message") or "Do the task."})
    position, turn, text = 0, 0, ""
    run = secrets.token_hex(3)  # tool call ids stay unique across the runs of a session
    while True:
        ctx.signal.raise_if_cancelled()
        turn += 1
        await hook({"type": "turn-start", "turn": turn})
        started = time.perf_counter()
        entry, position = await _model_call(ctx, hook, script, position)
        latency = round((time.perf_counter() - started) * 1000, 3)
        text = str(entry.get("text") or "")
        if entry.get("reasoning"):
            await hook({"type": "reasoning", "text": str(entry["reasoning"])})
        if text and config.get("stream"):
            for i in range(0, len(text), 8):
                await hook({"type": "message", "text": text[i : i + 8], "delta": True})
        elif text:
            await hook({"type": "message", "text": text})
        codes = entry.get("code")
        codes = [codes] if isinstance(codes, str) else list(codes or [])
        conversation.append({"role": "assistant", "content": text, "calls": codes})
        for index, code in enumerate(codes):
            ctx.signal.raise_if_cancelled()
            call = {"code": code}
            call_id = f"call-{run}-{turn}-{index}"
            directive = await hook({"type": "tool-call", "tool": "invoke", "args": call, "id": call_id})
            if directive.get("deny"):
                result = {"text": f"Tool call denied: {directive['deny']}", "error": True}
            else:
                result = await ctx.manager.invoke(invoke_ref, call)
            await hook({"type": "tool-result", "tool": "invoke", "args": call, "result": result, "id": call_id})
            conversation.append({"role": "tool", "content": result.get("text", "")})
        if config.get("context_edit"):
            await _edit_context(hook, conversation, int(config.get("context_keep", 6)))
        usage = entry.get("usage") or _estimate(conversation, text)
        end = {"type": "turn-end", "turn": turn, "result": text, "usage": usage, "latency_ms": latency}
        directive = await hook({**end, "stop_reason": "tool_use" if codes else "end_turn"})
        if directive.get("stop"):
            return directive.get("result", text)
        if directive.get("continue"):
            if directive.get("message"):
                conversation.append({"role": "user", "content": directive["message"]})
            continue
        if not codes:  # no directive: a turn without tool calls ends the run
            return text


async def _model_call(ctx, hook, script, position):
    """The next scripted turn, with errors reported and retried as the hook decides."""
    attempt = 0
    while True:
        if position >= len(script):
            raise ModelError(
                f"the script has no turn {position + 1} (it has {len(script)}); the model has nothing more to say"
            )
        entry = script[position]
        position += 1
        if entry.get("delay"):
            await _sleep(ctx, float(entry["delay"]))
        if "error" not in entry:
            return entry, position
        attempt += 1
        error = entry["error"] if isinstance(entry["error"], dict) else {"message": str(entry["error"])}
        error = {"type": "ModelError", "retryable": False, **error}
        directive = await hook({"type": "error", "error": error, "attempt": attempt}) or {}
        if not directive.get("retry"):
            raise ModelError(f"{error['type']}: {error.get('message', '')}")
        delay = float(directive.get("delay") or 0)
        await hook({"type": "retry", "attempt": attempt, "delay": delay, "error": error})
        await _sleep(ctx, delay)


async def _sleep(ctx, seconds):
    """Sleep, but wake up at once when the run is cancelled."""
    try:
        await asyncio.wait_for(ctx.signal.wait(), timeout=seconds)
    except TimeoutError:
        return
    ctx.signal.raise_if_cancelled()


async def _edit_context(hook, conversation, keep):
    """context_edit: elide tool results older than the last ``keep`` messages."""
    removed = 0
    for message in conversation[2:-keep]:
        if message["role"] == "tool" and not message["content"].startswith("[elided"):
            removed += len(message["content"])
            message["content"] = f"[elided: {len(message['content'])} characters]"
    if removed:
        await hook({"type": "context-edit", "removed": removed, "kept": keep, "reason": "older tool results elided"})


def _from_history(message):
    """A neutral history message as an entry of the conversation kept here."""
    role = message.get("role")
    if role == "assistant":
        codes = [c.get("input", {}).get("code", "") for c in message.get("tool_calls") or ()]
        return {"role": "assistant", "content": message.get("text") or "", "calls": codes}
    if role == "summary":
        return {"role": "user", "content": f"[Previous conversation summary: {message.get('text') or ''}]"}
    return {"role": "tool" if role == "tool" else "user", "content": message.get("text") or ""}


def _estimate(conversation, text):
    chars = sum(len(json.dumps(m)) for m in conversation)
    return {"input_tokens": chars // 4, "output_tokens": max(1, len(text) // 4)}
