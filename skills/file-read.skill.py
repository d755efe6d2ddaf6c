"""Read a text file inside the allowed paths (security.allowed_paths / denied_paths)."""

from agent_apps.errors import AgentAppsError
from agent_apps.tools import path_policy, security_for
from agent_apps.tools.files import read_bytes

frontmatter = {
    "name": "file-read",
    "description": "Read a UTF-8 text file. Relative paths are relative to the workspace. "
    "Optionally only lines start_line..end_line (1-based, inclusive). Large files are cut "
    "at security.output_kb (default 200 KB) with a notice.",
    "params": {
        "type": "object",
        "properties": {
            "path": {"type": "string", "minLength": 1, "maxLength": 4096, "description": "the file to read"},
            "start_line": {"type": "integer", "minimum": 1, "description": "first line to return (1-based)"},
            "end_line": {"type": "integer", "minimum": 1, "description": "last line to return (inclusive)"},
        },
        "required": ["path"],
        "additionalProperties": False,
    },
    "metadata": {"category": "read", "tags": ["file"], "returns": {"type": "string"}},
}


async def main(ctx, args):
    path = path_policy(ctx, reading=True).check("file-read", args["path"])
    if not path.is_file():
        raise AgentAppsError(f"file-read: {args['path']}: {'is a directory' if path.is_dir() else 'no such file'}")
    limit = int(security_for(ctx)["output_kb"]) * 1024
    data, size = read_bytes(path, limit)
    if b"\x00" in data[:8192]:
        raise AgentAppsError(f"file-read: {args['path']} looks binary ({size} bytes); it is not shown")
    text = data.decode("utf-8", errors="replace")
    if "start_line" in args or "end_line" in args:
        lines = text.splitlines(keepends=True)
        start = args.get("start_line", 1)
        end = args.get("end_line", len(lines))
        text = "".join(lines[start - 1 : end])
    if size > limit:
        text += f"\n[file truncated by agent-apps: showed {limit} of {size} bytes; read a line range]"
    return text
