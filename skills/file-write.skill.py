"""Write a text file inside the allowed paths; creates parent directories."""

from agent_apps.tools import path_policy
from agent_apps.tools.files import write_bytes

frontmatter = {
    "name": "file-write",
    "description": "Write text to a file (replacing it, or appending with append=true). "
    "Parent directories are created. Relative paths are relative to the workspace.",
    "params": {
        "type": "object",
        "properties": {
            "path": {"type": "string", "minLength": 1, "maxLength": 4096, "description": "the file to write"},
            "content": {"type": "string", "description": "the text to write (UTF-8)"},
            "append": {"type": "boolean", "default": False, "description": "append instead of replacing"},
        },
        "required": ["path", "content"],
        "additionalProperties": False,
    },
    "metadata": {
        "category": "write",
        "tags": ["file"],
        "returns": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "bytes": {"type": "integer"}},
            "required": ["path", "bytes"],
        },
    },
}


async def main(ctx, args):
    path = path_policy(ctx).check("file-write", args["path"], write=True)
    data = args["content"].encode("utf-8")
    write_bytes(path, data, append=args["append"])
    return {"path": str(path), "bytes": len(data)}
