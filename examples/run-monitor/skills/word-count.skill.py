"""A tool for the worker agent."""

frontmatter = {
    "description": "Count the words in a text.",
    "params": {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
        "additionalProperties": False,
    },
    "metadata": {"returns": {"type": "integer"}},
}


async def main(ctx, args):
    return len(args["text"].split())
