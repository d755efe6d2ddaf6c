"""A skill that calls other skills: its allowed-tools bounds what it may call."""

import asyncio

frontmatter = {
    "description": "Word statistics of a text, computed by calling word-count twice.",
    "params": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    "allowed-tools": "word-count",
    "middleware": ["timing(label=stats)"],
    "metadata": {
        "returns": {
            "type": "object",
            "properties": {"words": {"type": "integer"}, "distinct": {"type": "integer"}},
            "required": ["words", "distinct"],
        }
    },
}


async def main(ctx, args):
    words, distinct = await asyncio.gather(
        ctx.manager.invoke("word-count", {"text": args["text"]}),
        ctx.manager.invoke("word-count", {"text": args["text"], "unique": True}),
    )
    return {"words": words, "distinct": distinct}
