"""The shell tool's blocklist of destructive commands: defence in depth, not a wall.

The primary protections are elsewhere (the permission policy decides whether ``shell``
runs at all; CLI tools never use a shell). This list catches the obvious accidents an
agent might produce: wiping the disk or home, privilege escalation, powering off,
formatting, raw disk writes, world-writable permissions, fork bombs. It is trivially
bypassed by anyone who tries (``eval "$(echo ... | base64 -d)"``), which is why it is
not the thing that makes ``shell`` safe to allow.

Rules (each checked on every simple command of the line, after splitting on ``;``,
``&&``, ``||``, ``|``, ``&``, newlines, ``$(``, backticks, and skipping wrappers such as
``env``, ``nohup``, ``xargs``, ``time``, ``nice``, ``command``, ``exec``):

* ``sudo``, ``su``, ``doas``, ``pkexec``;
* ``shutdown``, ``reboot``, ``halt``, ``poweroff``, ``init 0``/``init 6``,
  ``systemctl poweroff|reboot|halt``;
* ``fdisk``, ``parted``, ``wipefs``; ``mkfs``, ``mkfs.*`` and ``dd`` onto a device
  (``/dev/...``: elsewhere, on an image file, they are destructive, so ``admin``
  calls the policy asks about: destructive.py);
* ``rm`` that is recursive and names ``/``, ``/*``, ``~``, ``$HOME`` or a top-level
  system directory (``/etc``, ``/usr``, ...), or uses ``--no-preserve-root``;
* ``chmod`` with mode ``777`` (or ``a+rwx``), ``chmod``/``chown`` recursive on ``/``;
* output redirected onto a block device (``> /dev/sda``);
* the classic fork bomb ``:(){ :|:& };:`` and functions that pipe into themselves.
"""

from __future__ import annotations

import re
import shlex

__all__ = ["blocked"]

_SPLIT = re.compile(r"\|\||&&|;|\||&|\n|\$\(|`|\(|\)|\{|\}")
_WRAPPERS = {"env", "nohup", "xargs", "time", "nice", "command", "exec", "builtin", "timeout", "stdbuf", "ionice"}
_ALWAYS = {
    "sudo": "privilege escalation",
    "su": "privilege escalation",
    "doas": "privilege escalation",
    "pkexec": "privilege escalation",
    "shutdown": "powers the machine off",
    "reboot": "reboots the machine",
    "halt": "halts the machine",
    "poweroff": "powers the machine off",
    "fdisk": "edits partition tables",
    "parted": "edits partition tables",
    "wipefs": "wipes filesystem signatures",
}
_SYSTEM_DIRS = {
    "/",
    "/*",
    "~",
    "~/",
    "~/*",
    "$HOME",
    "${HOME}",
    "$HOME/",
    "$HOME/*",
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/home",
    "/lib",
    "/lib64",
    "/opt",
    "/proc",
    "/root",
    "/sbin",
    "/srv",
    "/sys",
    "/usr",
    "/var",
}
# A function definition ``name() {``; the name must start after a separator, so the
# search stays linear on long commands (the old backreference took seconds on 30 KB).
_FUNCTION = re.compile(r"(?<![^\s;&|(){}])([^\s;&|(){}]+)\s*\(\)\s*\{([^{}]*)")
_DEVICE_WRITE = re.compile(r">\s*/dev/(sd[a-z]|nvme\d|hd[a-z]|vd[a-z]|xvd[a-z]|mmcblk\d|disk\d)")


def blocked(command: str) -> str | None:
    """Why ``command`` is refused, or None if no rule matches."""
    if ":(){" in command.replace(" ", "") or _pipes_into_itself(command):
        return "fork bomb"
    if _DEVICE_WRITE.search(command):
        return "writes onto a block device"
    for segment in _SPLIT.split(command):
        words = _words(segment)
        while words and (
            "=" in words[0] and not words[0].startswith("=") or words[0] in _WRAPPERS or words[0].startswith("-")
        ):
            words = words[1:]
        if not words:
            continue
        program = words[0].rsplit("/", 1)[-1]
        reason = _check(program, words[1:])
        if reason is not None:
            return f"{reason}: {segment.strip()}"
    return None


def _pipes_into_itself(command: str) -> bool:
    """A function whose body pipes it into itself (``f() { f | f & }; f``)."""
    for match in _FUNCTION.finditer(command):
        name = re.escape(match.group(1))
        if re.search(name + r"\s*\|\s*" + name, match.group(2)):
            return True
    return False


def _words(segment: str) -> list[str]:
    try:
        return shlex.split(segment, comments=True)
    except ValueError:  # unbalanced quotes: fall back to whitespace
        return segment.split()


def _check(program: str, args: list[str]) -> str | None:
    if program in _ALWAYS:
        return f"'{program}' is blocked ({_ALWAYS[program]})"
    if (program == "mkfs" or program.startswith("mkfs.")) and any(t.startswith("/dev/") for t in args):
        return f"'{program}' onto a device is blocked (formats a filesystem)"
    if program == "dd" and any(a.startswith("of=/dev/") and a not in ("of=/dev/null", "of=/dev/stdout") for a in args):
        return "'dd' onto a device is blocked (raw disk write)"
    if program == "init" and args[:1] in (["0"], ["6"]):
        return "'init 0/6' is blocked (powers off or reboots)"
    if program == "systemctl" and any(a in ("poweroff", "reboot", "halt", "kexec") for a in args):
        return "'systemctl poweroff/reboot/halt' is blocked"
    flags = "".join(a[1:] for a in args if a.startswith("-") and not a.startswith("--"))
    longs = {a for a in args if a.startswith("--")}
    targets = [a for a in args if not a.startswith("-")]
    recursive = "r" in flags or "R" in flags or "--recursive" in longs
    if program == "rm":
        if "--no-preserve-root" in longs:
            return "'rm --no-preserve-root' is blocked"
        hit = [t for t in targets if t in _SYSTEM_DIRS or _normal(t) in _SYSTEM_DIRS]
        if recursive and hit:
            return f"recursive 'rm' of {hit[0]} is blocked"
    if program == "chmod":
        if any(t in ("777", "0777", "a+rwx", "ugo+rwx") for t in targets):
            return "'chmod 777' is blocked (world-writable)"
        if recursive and any(t in ("/", "/*") for t in targets):
            return "recursive 'chmod' of / is blocked"
    if program == "chown" and recursive and any(t in ("/", "/*") for t in targets):
        return "recursive 'chown' of / is blocked"
    return None


def _normal(target: str) -> str:
    """``//``, ``/.``, ``/usr/../`` and ``/etc/`` as the directory they name."""
    if not target.startswith("/"):
        return target
    import posixpath

    normal = posixpath.normpath(target)
    return "/" if normal == "//" else normal
