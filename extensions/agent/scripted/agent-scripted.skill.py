"""The offline provider: plays a fixed script through the real provider protocol.

Each script entry is one model turn::

    - text: "Let me count."        # what the model says (optional)
      reasoning: "..."              # extended thinking (optional)
      code: |                       # one invoke call; a list gives several in one turn
        ctx.manager.finish(42)
      delay: 0.5                    # seconds the "model" takes (cancellable)
      usage: {input_tokens: 10, output_tokens: 3}   # else estimated (4 characters a token), marked estimated: true
    - error: {type: ThrottlingException, message: "slow down", retryable: true}
                                    # this model call fails; the hook decides retry or stop

With ``config.stream: true`` text arrives as ``message`` deltas, as from a streaming
model. ``messages`` (a session's earlier messages, in the neutral format) come before
the user's message in the conversation it keeps, and count in its usage estimate, as do
``attachments`` (the user message's ``media``: 250 tokens an image or PDF, a text
document its characters); the script alone decides what the "model" says. When compaction has the model summarize,
``model.compaction.model.script`` plays that call (its first turn's text is the answer).

It reports every model call (``model-call`` before, ``model-response`` after; see
``agent_apps/agent/model_calls.py``): a ``response`` directive replaces the script's
turn (a resumed run replays what the model said; the response remembers the script
position, so the script goes on where it was), ``messages`` and ``system`` directives
replace what this turn's "model" receives (it reports them in ``model-response``'s
``received`` when ``config.echo`` is true, for tests of what a model is sent).
It is a complete provider: tests, docs and demos use it, and the provider
conformance suite holds it to the same protocol as a real model.
"""

import asyncio
import json
import secrets
import time

from agent_apps.state.messages import media_tokens

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
            "model_messages": {"type": "boolean"},
            "buffer_responses": {"type": "boolean"},
            "attachments": {"type": "array", "items": {"type": "object"}},
        },
        "required": ["prompt", "invoke_ref", "hook_ref"],
    },
    "metadata": {
        "tags": ["meta-internal", "provider"],
        "visibility": "hidden",
        "provider": {"model_calls": True},
        "config_keys": ["model.script", "model.stream", "model.echo"],  # the model.* keys it reads beyond the agent's
    },
}


class ModelError(Exception):
    """The scripted model call failed (an ``error`` entry the hook did not retry)."""


async def main(ctx, args):
    config = args.get("config") or {}
    script = list(config.get("script") or [])
    hook_ref, invoke_ref = args["hook_ref"], args["invoke_ref"]

    async def hook(event):
        return await ctx.manager.invoke(hook_ref, event) or {}

    system = args["prompt"]
    # the conversation "the model" sees, in the neutral message format
    conversation = list(args.get("messages") or ())
    user = {"role": "user", "text": args.get("user_message") or "Do the task."}
    if args.get("attachments"):
        user["media"] = list(args["attachments"])
    conversation.append(user)
    model = _Model(ctx, hook, script, run=secrets.token_hex(3), args=args)
    turn, text = 0, ""
    while True:
        ctx.signal.raise_if_cancelled()
        turn += 1
        await hook({"type": "turn-start", "turn": turn})
        response, latency = await model.call(turn, system, conversation)
        text = response.get("text") or ""
        if response.get("reasoning"):
            await hook({"type": "reasoning", "text": response["reasoning"]})
        if text and config.get("stream"):
            for i in range(0, len(text), 8):
                await hook({"type": "message", "text": text[i : i + 8], "delta": True})
        elif text:
            await hook({"type": "message", "text": text})
        calls = response.get("tool_calls") or []
        conversation.append({"role": "assistant", "text": text, "tool_calls": calls})
        parallel = config.get("parallel_tool_calls", True) and len(calls) > 1
        # In parallel, the calls are announced in order, run together, and their results
        # reported and kept in call order; else each runs after the one before.
        for batch in [calls] if parallel else [[call] for call in calls]:
            ctx.signal.raise_if_cancelled()
            directives = [
                await hook({"type": "tool-call", "tool": call["name"], "args": call["input"], "id": call["id"]})
                for call in batch
            ]
            pairs = zip(batch, directives, strict=True)
            results = await asyncio.gather(*(_run_tool(ctx, invoke_ref, call, directive) for call, directive in pairs))
            for call, result in zip(batch, results, strict=True):
                event = {"type": "tool-result", "tool": call["name"], "args": call["input"], "result": result}
                await hook({**event, "id": call["id"]})
                conversation.append(
                    {"role": "tool", "tool_call_id": call["id"], "name": call["name"], "text": result.get("text", ""),
                     "error": bool(result.get("error"))}
                )
        if config.get("context_edit"):
            await _edit_context(hook, conversation, int(config.get("context_keep", 6)))
        end = {"type": "turn-end", "turn": turn, "result": text, "usage": response.get("usage"), "latency_ms": latency}
        directive = await hook({**end, "stop_reason": response.get("stop_reason") or "end_turn"})
        if directive.get("stop"):
            return directive.get("result", text)
        if directive.get("continue"):
            if directive.get("message"):
                conversation.append({"role": "user", "text": directive["message"]})
            continue
        if not calls:  # no directive: a turn without tool calls ends the run
            return text


async def _run_tool(ctx, invoke_ref, call, directive):
    if directive.get("deny"):
        return {"text": f"Tool call denied: {directive['deny']}", "error": True}
    return await ctx.manager.invoke(invoke_ref, {"code": call["input"].get("code", "")})


class _Model:
    """The scripted "model": one script entry per call, reported as model calls."""

    def __init__(self, ctx, hook, script, *, run, args):
        self.ctx, self.hook, self.script, self.run = ctx, hook, script, run
        self.position = 0
        self.with_messages = bool(args.get("model_messages"))
        self.buffered = bool(args.get("buffer_responses"))
        self.echo = bool((args.get("config") or {}).get("echo"))

    async def call(self, turn, system, conversation):
        """This turn's response and the model's latency in ms, after errors are
        reported and retried as the hook decides."""
        attempt = 0
        while True:
            attempt += 1
            event = {"type": "model-call", "turn": turn, "attempt": attempt}
            if self.with_messages:
                event.update(messages=list(conversation), system=system)
            directive = await self.hook(event)
            # a copy: what this call was sent, whatever the conversation becomes
            messages = list(directive.get("messages", conversation))
            sent = {"system": directive.get("system", system), "messages": messages}
            started = time.perf_counter()
            replayed = "response" in directive
            if replayed:
                response = directive["response"]
                self.position = int((response.get("meta") or {}).get("script_position", self.position))
            else:
                entry = await self._next_entry()
                if "error" in entry:
                    await self._failed(entry, attempt)
                    continue
                response = self._response(entry, turn, sent)
            latency = round((time.perf_counter() - started) * 1000, 3)
            report = {"type": "model-response", "turn": turn, "attempt": attempt, "response": response}
            directive = await self.hook({**report, "latency_ms": latency, "replayed": replayed})
            if self.buffered and "response" in directive:
                response = directive["response"]
            return response, latency

    async def _next_entry(self):
        if self.position >= len(self.script):
            raise ModelError(
                f"the script has no turn {self.position + 1} (it has {len(self.script)}); "
                "the model has nothing more to say"
            )
        entry = self.script[self.position]
        self.position += 1
        if entry.get("delay"):
            await _sleep(self.ctx, float(entry["delay"]))
        return entry

    async def _failed(self, entry, attempt):
        error = entry["error"] if isinstance(entry["error"], dict) else {"message": str(entry["error"])}
        error = {"type": "ModelError", "retryable": False, **error}
        directive = await self.hook({"type": "error", "error": error, "attempt": attempt}) or {}
        if not directive.get("retry"):
            raise ModelError(f"{error['type']}: {error.get('message', '')}")
        delay = float(directive.get("delay") or 0)
        await self.hook({"type": "retry", "attempt": attempt, "delay": delay, "error": error})
        await _sleep(self.ctx, delay)

    def _response(self, entry, turn, sent):
        text = str(entry.get("text") or "")
        codes = entry.get("code")
        codes = [codes] if isinstance(codes, str) else list(codes or [])
        calls = [
            {"id": f"call-{self.run}-{turn}-{i}", "name": "invoke", "input": {"code": code}}
            for i, code in enumerate(codes)
        ]
        response = {
            "text": text,
            "tool_calls": calls,
            "usage": entry.get("usage") or _estimate(sent, text),
            "stop_reason": "tool_use" if calls else "end_turn",
            "meta": {"script_position": self.position},
        }
        if entry.get("reasoning"):
            response["reasoning"] = str(entry["reasoning"])
        if self.echo:
            response["meta"]["received"] = sent
        return response


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
    for message in conversation[1:-keep]:
        if message["role"] == "tool" and not message["text"].startswith("[elided"):
            removed += len(message["text"])
            message["text"] = f"[elided: {len(message['text'])} characters]"
    if removed:
        await hook({"type": "context-edit", "removed": removed, "kept": keep, "reason": "older tool results elided"})


def _estimate(sent, text):
    """Four characters a token, and each media part what the message format says."""
    chars, media = len(sent["system"]), 0
    for message in sent["messages"]:
        chars += len(json.dumps({k: v for k, v in message.items() if k != "media"}))
        media += sum(media_tokens(part) for part in message.get("media") or ())
    return {"input_tokens": chars // 4 + media, "output_tokens": max(1, len(text) // 4), "estimated": True}
