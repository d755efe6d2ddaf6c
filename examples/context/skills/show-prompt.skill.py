"""A provider that answers with the system prompt it was given, marking where the
stable prefix ends: run.py uses it to show what the model of the example reads."""

frontmatter = {
    "description": "Show the system prompt (a stand-in provider for the example).",
    "params": {
        "type": "object",
        "properties": {"prompt": {"type": "string"}, "stable_prefix": {"type": "integer"}},
    },
    "metadata": {"visibility": "hidden", "tags": ["meta-internal", "provider"]},
}


async def main(ctx, args):
    prompt, stable = args["prompt"], args.get("stable_prefix", len(args["prompt"]))
    return prompt[:stable] + "\n----- the stable prefix ends here (a cache point goes here) -----\n\n" + prompt[stable:]
