"""Replace one unique snippet in a text file: the edit coding agents expect."""

from agent_apps.errors import AgentAppsError
from agent_apps.tools import path_policy
from agent_apps.tools.files import read_bytes, write_bytes

frontmatter = {
    "name": "file-edit",
    "description": "Replace the exact text old_text with new_text in a file. old_text must occur "
    "exactly once (include surrounding lines to make it unique); the edit fails otherwise and "
    "the file is left unchanged.",
    "params": {
        "type": "object",
        "properties": {
            "path": {"type": "string", "minLength": 1, "maxLength": 4096},
            "old_text": {"type": "string", "minLength": 1, "description": "the exact text to replace"},
            "new_text": {"type": "string", "description": "the replacement"},
        },
        "required": ["path", "old_text", "new_text"],
        "additionalProperties": False,
    },
    "metadata": {
        "category": "write",
        "tags": ["file"],
        "returns": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "line": {"type": "integer"}},
            "required": ["path", "line"],
        },
    },
}

_MAX = 16 * 1024 * 1024


async def main(ctx, args):
    path = path_policy(ctx).check("file-edit", args["path"], write=True)
    if not path.is_file():
        raise AgentAppsError(f"file-edit: {args['path']}: no such file")
    data, size = read_bytes(path, _MAX)
    if size > _MAX:
        raise AgentAppsError(f"file-edit: {args['path']} is larger than 16 MB")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise AgentAppsError(f"file-edit: {args['path']} is not UTF-8 text") from None
    old = args["old_text"]
    count = text.count(old)
    if count == 0:
        hint = " (it matches if whitespace is ignored: check indentation)" if _loose(old) in _loose(text) else ""
        raise AgentAppsError(f"file-edit: old_text not found in {args['path']}{hint}; the file is unchanged")
    if count > 1:
        raise AgentAppsError(
            f"file-edit: old_text occurs {count} times in {args['path']}; include more surrounding "
            "text so it matches exactly once. The file is unchanged"
        )
    index = text.index(old)
    write_bytes(path, (text[:index] + args["new_text"] + text[index + len(old) :]).encode("utf-8"))
    return {"path": str(path), "line": text.count("\n", 0, index) + 1}


def _loose(text):
    return " ".join(text.split())
