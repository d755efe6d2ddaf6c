"""List a directory inside the allowed paths; denied entries are not shown."""

import os
from fnmatch import fnmatchcase

from agent_apps.errors import AgentAppsError
from agent_apps.tools import path_policy

frontmatter = {
    "name": "file-list",
    "description": "List files and directories at a path (default: the workspace). "
    "recursive=true walks subdirectories (symlinked directories are not followed); "
    "'match' filters names with a glob such as '*.py'. At most 'limit' entries (default 1000).",
    "params": {
        "type": "object",
        "properties": {
            "path": {"type": "string", "default": ".", "minLength": 1, "maxLength": 4096},
            "recursive": {"type": "boolean", "default": False},
            "match": {"type": "string", "maxLength": 200, "description": "glob over entry names"},
            "limit": {"type": "integer", "minimum": 1, "maximum": 10000, "default": 1000},
        },
        "additionalProperties": False,
    },
    "metadata": {
        "category": "read",
        "tags": ["file"],
        "returns": {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "entries": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "name": {"type": "string"},
                            "type": {"enum": ["file", "dir", "link", "other"]},
                            "size": {"type": "integer"},
                        },
                    },
                },
                "truncated": {"type": "boolean"},
            },
        },
    },
}


async def main(ctx, args):
    policy = path_policy(ctx, reading=True)
    root = policy.check("file-list", args["path"])
    if not root.is_dir():
        raise AgentAppsError(f"file-list: {args['path']}: not a directory")
    entries, limit, pattern = [], args["limit"], args.get("match")
    stack = [root]
    truncated = False
    while stack and not truncated:
        directory = stack.pop()
        try:
            items = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError:
            continue
        subdirs = []
        for item in items:
            if not policy.visible(item.path):
                continue
            kind = "link" if item.is_symlink() else "dir" if item.is_dir() else "file" if item.is_file() else "other"
            if kind == "dir" and args["recursive"]:
                subdirs.append(item.path)
            if pattern and not fnmatchcase(item.name, pattern):
                continue
            if len(entries) >= limit:
                truncated = True
                break
            entry = {"name": os.path.relpath(item.path, root), "type": kind}
            if kind == "file":
                entry["size"] = item.stat(follow_symlinks=False).st_size
            entries.append(entry)
        stack.extend(reversed(subdirs))
    return {"path": str(root), "entries": entries, "truncated": truncated}
