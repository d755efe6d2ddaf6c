"""A code skill: frontmatter (read without importing this file) and main."""

frontmatter = {
    "description": "Count the words in a text.",
    "params": {
        "type": "object",
        "properties": {
            "text": {"type": "string", "description": "the text to count"},
            "unique": {"type": "boolean", "default": False, "description": "count distinct words only"},
        },
        "required": ["text"],
        "additionalProperties": False,
    },
    "metadata": {"returns": {"type": "integer", "minimum": 0}, "tags": ["text"]},
}


async def main(ctx, args):
    words = args["text"].lower().split()
    return len(set(words)) if args["unique"] else len(words)
