"""Red-team suite: hostile arguments to the host tools (files, http-fetch, shell, CLI
tools). Each attempt is refused with a clear error and leaves nothing changed."""

from __future__ import annotations

import json
import socket
import threading
import types
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from tools_helpers import INTERACTIVE, make_manager, security

from agent_apps import AgentAppsError, ArgsInvalid
from agent_apps.tools import PermissionDenied, ToolsPlugin
from agent_apps.tools import http as http_tool
from agent_apps.tools.blocklist import blocked
from agent_apps.tools.http import check_url

pytestmark = pytest.mark.anyio

# -- 7. protected config files stay protected through symlinks ---------------------------------


def _links(workspace, spec):
    """``spec``: [(link, target)] made in order; targets relative to the link."""
    for link, target in spec:
        path = workspace / link
        path.parent.mkdir(parents=True, exist_ok=True)
        path.symlink_to(target)


LINKS = {
    # the config file itself is a link: writing "agent-apps.yaml" rewrote the file behind it
    "config-is-a-link": ([("agent-apps.yaml", "conf/real.yaml")], "agent-apps.yaml"),
    "tools-is-a-link": ([("sub/tools.yaml", "../conf/real.yaml")], "sub/tools.yaml"),
    # a harmless name that leads to the config file
    "link-to-config": ([("agent-apps.yaml", "conf/real.yaml"), ("notes.txt", "agent-apps.yaml")], "notes.txt"),
    # a chain with the protected name in the middle
    "chain-through-config": (
        [("tools.yaml", "conf/real.yaml"), ("a.txt", "b.txt"), ("b.txt", "tools.yaml")], "a.txt"
    ),
    # a linked directory: the name as given is protected
    "through-linked-dir": ([("cfg", "conf")], "cfg/agent-apps.yaml"),
    # a chain longer than the kernel's 40 links (the tools open the resolved path, so
    # nothing refuses it on the way): the protected name past the 40th link counts too
    "long-chain": (
        [("agent-apps.yaml", "conf/real.yaml"), *((f"l{i}.txt", f"l{i + 1}.txt") for i in range(44)),
         ("l44.txt", "agent-apps.yaml")],
        "l0.txt",
    ),
}


@pytest.mark.parametrize("skill", ["file-write", "file-edit"])
@pytest.mark.parametrize("name", sorted(LINKS))
async def test_protected_config_through_symlinks(cm, workspace, name, skill):
    (workspace / "conf").mkdir()
    real = workspace / "conf" / "real.yaml"
    real.write_text("security: {mode: unattended}\n")
    (workspace / "conf" / "agent-apps.yaml").write_text("security: {mode: unattended}\n")
    links, path = LINKS[name]
    _links(workspace, links)
    args = (
        {"path": path, "content": "security: {policy: {allow: ['*']}}"}
        if skill == "file-write"
        else {"path": path, "old_text": "unattended", "new_text": "interactive"}
    )
    with pytest.raises(PermissionDenied, match="agent-apps configuration"):
        await cm.invoke(skill, args, config=INTERACTIVE)
    assert real.read_text() == "security: {mode: unattended}\n"
    assert (workspace / "conf" / "agent-apps.yaml").read_text() == "security: {mode: unattended}\n"


async def test_ordinary_links_are_still_written(cm, workspace):
    (workspace / "real.txt").write_text("old")
    (workspace / "alias.txt").symlink_to("real.txt")
    await cm.invoke("file-write", {"path": "alias.txt", "content": "new"}, config=INTERACTIVE)
    assert (workspace / "real.txt").read_text() == "new"


# -- 8. http-fetch refuses every spelling of a private address ---------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://[64:ff9b::a9fe:a9fe]/latest/meta-data/",  # NAT64 of the metadata address
        "http://[64:ff9b::7f00:1]/",  # NAT64 of 127.0.0.1
        "http://[64:ff9b::a00:1]/",  # NAT64 of 10.0.0.1
        "http://[64:ff9b:1::a9fe:a9fe]/",  # local-use NAT64
        "http://[::ffff:169.254.169.254]/",  # IPv4-mapped
        "http://[::ffff:7f00:1]/",  # IPv4-mapped, hex
        "http://[::a9fe:a9fe]/",  # IPv4-compatible
        "http://[2002:a9fe:a9fe::1]/",  # 6to4 of 169.254.169.254
        "http://[2002:7f00:1::]/",  # 6to4 of 127.0.0.1
        "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/",  # Teredo
        "http://[fec0::1]/",  # site-local
        "http://[fe80::1]/",  # link-local
        "http://[::]/",
        "http://[ff02::1]/",  # multicast
        "http://2852039166/",  # 169.254.169.254 as one number
        "http://0xa9fea9fe/",
        "http://0251.0376.0251.0376/",  # octal
        "http://127.1/",
        "http://100.64.0.1/",  # carrier-grade NAT
        "http://localhost/",
    ],
)
def test_private_addresses_in_every_spelling(url):
    with pytest.raises(PermissionDenied, match="non-public address"):
        check_url(url, allow_private=False)


@pytest.mark.parametrize("url", ["http://[64:ff9b::808:808]/", "http://[2002:808:808::1]/", "http://8.8.8.8/"])
def test_public_addresses_in_those_spellings_are_fine(url):
    check_url(url, allow_private=False)


class _Redirect(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(302)
        self.send_header("Location", self.path[len("/to/") :])
        self.end_headers()


@pytest.fixture
def redirector(monkeypatch) -> Iterator[str]:
    """A local server that redirects ``/to/URL`` to URL; the address check is told
    that 127.0.0.1 is public, so only the redirect target is judged."""
    real = socket.getaddrinfo

    def resolve(host, port, *args, **kwargs):
        return real("93.184.216.34" if host == "127.0.0.1" else host, port, *args, **kwargs)

    monkeypatch.setattr(http_tool, "socket", types.SimpleNamespace(getaddrinfo=resolve, gaierror=socket.gaierror))
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Redirect)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.mark.parametrize(
    "target", ["http://[64:ff9b::a9fe:a9fe]/latest/meta-data/", "http://[::ffff:127.0.0.1]:1/", "http://10.1.2.3/"]
)
async def test_every_redirect_hop_is_checked(cm, redirector, target):
    with pytest.raises(PermissionDenied, match="non-public address"):
        await cm.invoke("http-fetch", {"url": f"{redirector}/to/{target}"}, config=security())


# -- 2. no regex on agent input can hang the host ----------------------------------------------


@pytest.mark.parametrize(
    "command",
    ["a" * 100_000, "f(){ " * 20_000, "x" * 50_000 + "() {" + " x" * 20_000, "(" * 100_000],
    ids=["one-word", "many-definitions", "long-name", "brackets"],
)
def test_shell_blocklist_stays_linear(command):
    """The fork-bomb rule used a backreference: 30 KB of one word took 15 s."""
    assert blocked(command) is None


@pytest.mark.parametrize(
    "command", [":(){ :|:& };:", "bomb() { bomb | bomb & }; bomb", "f(){ f|f& };f", "g () { g | g; }"]
)
def test_shell_blocklist_still_finds_fork_bombs(command):
    assert blocked(command) == "fork bomb"


async def test_cli_tool_patterns_cannot_hang_the_host(workspace, tmp_path, fake_bin):
    tools = tmp_path / "tools.yaml"
    tools.write_text(
        "tools:\n  - name: greedy\n    category: read\n    cmd: kubectl\n    args: ['{{word}}']\n"
        "    parameters:\n      word: {type: string, pattern: '^(a|aa)+$'}\n"
    )
    cm = make_manager(workspace, tmp_path, plugins=[ToolsPlugin([tools])])
    with pytest.raises(ArgsInvalid, match="does not match"):
        await cm.invoke("greedy", {"word": "a" * 5_000 + "!"}, config=INTERACTIVE)
    out = await cm.invoke("greedy", {"word": "aaa"}, config=INTERACTIVE)
    assert json.loads(out["stdout"]) == ["aaa"]
    with pytest.raises(ArgsInvalid, match="does not match"):  # RE2's '$' is the very end
        await cm.invoke("greedy", {"word": "aaa\n"}, config=INTERACTIVE)


def test_cli_tool_patterns_re2_cannot_run_are_load_errors(workspace, tmp_path, fake_bin):
    tools = tmp_path / "tools.yaml"
    tools.write_text(
        "tools:\n  - name: looks-ahead\n    category: read\n    cmd: kubectl\n"
        "    parameters:\n      word: {type: string, pattern: '^(?=a)a$'}\n"
    )
    cm = make_manager(workspace, tmp_path, plugins=[ToolsPlugin([tools])])
    (error,) = [e for e in cm.errors if "looks-ahead" in str(e) or str(tools) in str(e)]
    assert "bad pattern" in str(error) and "RE2" in str(error)


async def test_a_link_loop_is_an_error_not_a_hang(cm, workspace):
    (workspace / "a.txt").symlink_to("b.txt")
    (workspace / "b.txt").symlink_to("a.txt")
    with pytest.raises(AgentAppsError):
        await cm.invoke("file-write", {"path": "a.txt", "content": "x"}, config=INTERACTIVE)
