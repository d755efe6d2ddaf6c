"""A hostile ACP agent CLI for the red-team tests: raw JSON-RPC lines on stdout, what the
``acp`` package would refuse to send.

    python hostile_acp_agent.py MODE

It answers ``initialize`` and ``session/new`` properly, then misbehaves on
``session/prompt`` as MODE says:

``flood``       streams message chunks forever, and ignores ``session/cancel``
``huge``        sends one message chunk 60 MB long (past the 50 MB line limit)
``deep``        sends a message chunk nested 200,000 levels deep, then answers the
                prompt with a result as deep
``usage``       answers the prompt with a usage of 10**30 input tokens
``error``       fails the prompt with a 1 MB error message and data
``big-turn``    streams 64 KB of message chunks, then ends the prompt
``noise``       prints 1 MB lines of non-JSON before it answers ``initialize``
``babble``      prints 1 MB lines of non-JSON and never answers ``initialize``
``stderr``      writes 20 MB to stderr and exits before answering ``initialize``
``deaf``        never answers the prompt, and ignores session/cancel, the end of its
                stdin and SIGTERM

It imports nothing but the standard library.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading

MODE = sys.argv[1]
OUT = sys.stdout.buffer


def send(message: dict) -> None:
    OUT.write(json.dumps(message).encode() + b"\n")
    OUT.flush()


def chunk(session: str, text: str) -> dict:
    update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session, "update": update}}


def prompt(request: dict) -> None:
    session = request["params"]["sessionId"]
    if MODE == "flood":
        number = 0
        while True:
            number += 1
            send(chunk(session, f"flood {number} "))
    elif MODE == "huge":
        send(chunk(session, "x" * (int(os.environ.get("HUGE_MB", "60")) * 1024 * 1024)))
    elif MODE == "deep":
        deep = "[" * 200_000 + "]" * 200_000
        update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "deep"}}
        params = {"sessionId": session, "update": update, "_meta": {"x": None}}
        text = json.dumps({"jsonrpc": "2.0", "method": "session/update", "params": params})
        OUT.write(text.replace("null", deep).encode() + b"\n")
        result = {"stopReason": "end_turn", "_meta": None}  # the id after it: found all the same
        answer = json.dumps({"jsonrpc": "2.0", "result": result, "id": request["id"]})
        OUT.write(answer.replace("null", deep).encode() + b"\n")
        OUT.flush()
    elif MODE == "usage":
        send(chunk(session, "Done."))
        usage = {"inputTokens": 10**30, "outputTokens": 40, "totalTokens": 10**30 + 40}
        send({"jsonrpc": "2.0", "id": request["id"], "result": {"stopReason": "end_turn", "usage": usage}})
    elif MODE == "error":
        error = {"code": -32000, "message": "boom " * 200_000, "data": {"detail": "y" * 1_000_000}}
        send({"jsonrpc": "2.0", "id": request["id"], "error": error})
    elif MODE == "big-turn":
        for number in range(64):
            send(chunk(session, f"{number:04} " + "z" * 1019))
        send({"jsonrpc": "2.0", "id": request["id"], "result": {"stopReason": "end_turn"}})


def main() -> None:
    for line in sys.stdin.buffer:
        request = json.loads(line)
        method = request.get("method")
        if method == "initialize":
            if MODE == "babble":
                while True:
                    OUT.write(b"Usage: " + b"u" * (1024 * 1024) + b"\n")
                    OUT.flush()
            if MODE == "stderr":
                for _ in range(20):
                    sys.stderr.write("warning: " + "w" * (1024 * 1024) + "\n")
                sys.stderr.write("fatal: gave up\n")
                sys.exit(4)
            if MODE == "noise":
                for _ in range(3):
                    OUT.write(b"log: " + b"n" * (1024 * 1024) + b"\n")
            send({"jsonrpc": "2.0", "id": request["id"], "result": {"protocolVersion": 1, "agentCapabilities": {}}})
        elif method == "session/new":
            send({"jsonrpc": "2.0", "id": request["id"], "result": {"sessionId": "s1"}})
        elif method == "session/prompt":
            if MODE == "noise":
                send({"jsonrpc": "2.0", "id": request["id"], "result": {"stopReason": "end_turn"}})
            else:  # answer the next requests (session/cancel) while this one misbehaves
                threading.Thread(target=prompt, args=(request,), daemon=True).start()


if __name__ == "__main__":
    if MODE == "deaf":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    main()
    if MODE.startswith("huge") or MODE == "deaf":  # deaf to the end of its stdin: it goes on until killed
        threading.Event().wait()
