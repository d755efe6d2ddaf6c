"""The host-side rule for what agent code may invoke: bare skill names only.

Agent code is untrusted; a ref like ``file://x.py``, ``inline://...``, a path or
a ``callback://`` ref would make the host load or run code outside the sandbox.
The rule is a whitelist of ASCII: ``^[a-z0-9]+(-[a-z0-9]+)*$``, so upper case,
unicode look-alikes (Cyrillic 'а'), whitespace, dots and slashes all fail.
"""

from __future__ import annotations

import re

MAX_NAME = 128
_BARE = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*\Z", re.ASCII)


def is_bare_name(ref: object) -> bool:
    return isinstance(ref, str) and 0 < len(ref) <= MAX_NAME and _BARE.match(ref) is not None


def ref_refusal(ref: object) -> str | None:
    """Why ``ref`` is refused, or None when it is a bare skill name."""
    if is_bare_name(ref):
        return None
    if not isinstance(ref, str):
        what = f"a skill name must be a string, not {type(ref).__name__}"
    elif not ref:
        what = "the skill name is empty"
    elif len(ref) > MAX_NAME:
        what = f"the skill name is longer than {MAX_NAME} characters"
    else:
        shown = ref if len(ref) <= 60 else ref[:57] + "..."
        if "://" in ref:
            kind = "a URI"
        elif "/" in ref or "\\" in ref or ref.startswith("."):
            kind = "a path"
        elif not ref.isascii():
            kind = "a name with non-ASCII characters"
        elif ref != ref.lower():
            kind = "a name with upper-case letters"
        else:
            kind = "not a bare skill name"
        what = f"{shown!r} is {kind}"
    return (
        f"{what}; agent code may only invoke skills by bare name "
        "(lower-case letters, digits and single hyphens, like 'file-read')"
    )


#: Call options agent code may send with a call (the optional 4th element of a call
#: entry): ``middleware`` (a list of ``name`` / ``name(key=value)`` strings) and
#: ``next`` (true: advance the call the agent serves in middleware mode).
MAX_MIDDLEWARE = 16
MAX_MIDDLEWARE_REF = 1024


def options_refusal(options: object) -> tuple[str, str] | None:
    """``(error type, why)`` when a call's options are malformed, else None.

    Only the shape is checked here, and that the middleware are named by bare name
    (the rule for every ref agent code sends); the pipeline then checks that the
    caller may use each middleware and validates its params."""
    if not isinstance(options, dict):
        return "ArgsInvalid", "call options must be a JSON object"
    unknown = sorted(set(options) - {"middleware", "next"})
    if unknown:
        return "ArgsInvalid", f"unknown call option(s) {', '.join(map(repr, unknown))[:200]} (known: middleware)"
    if "next" in options:
        if options["next"] is not True or len(options) != 1:
            return "ArgsInvalid", "the 'next' option is true and comes alone"
        return None
    middleware = options.get("middleware")
    if not isinstance(middleware, list) or not all(isinstance(m, str) for m in middleware):
        return "ArgsInvalid", "middleware must be a list of strings like 'name' or 'name(key=value)'"
    if len(middleware) > MAX_MIDDLEWARE:
        return "LimitExceeded", f"at most {MAX_MIDDLEWARE} middleware per call, not {len(middleware)}"
    for ref in middleware:
        if len(ref) > MAX_MIDDLEWARE_REF:
            return "ArgsInvalid", f"a middleware ref is longer than {MAX_MIDDLEWARE_REF} characters"
        refusal = ref_refusal(ref.split("(", 1)[0].strip())
        if refusal is not None:
            return "ToolNotAllowed", f"middleware {refusal}"
    return None
