"""HTTP(S) fetching for the ``http-fetch`` skill: urllib, no new dependency.

Defaults (``security.http``): 30 s socket timeout, 1 MB body cap, GET/HEAD only,
http and https only (also on redirects), and no private, loopback, link-local or
otherwise reserved addresses (``allow_private: false``), so a model cannot reach the
cloud metadata endpoint or services on localhost, in any spelling: IPv6 forms that
carry an IPv4 address (IPv4-mapped ``::ffff:a.b.c.d``, NAT64 ``64:ff9b::/96``, 6to4,
Teredo) are judged by that address, and every redirect hop is checked again. The
address check resolves the host before connecting; DNS that changes its answer
between the check and the connect (rebinding) is not prevented. Requests can still carry data *out* in the URL: treat
``http-fetch`` as egress and deny it where that matters.
"""

from __future__ import annotations

import ipaddress
import socket
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import PermissionDenied

__all__ = ["FetchResult", "check_url", "fetch"]

USER_AGENT = "agent-apps http-fetch"
_TEXTUAL = ("json", "xml", "javascript", "yaml", "csv", "x-www-form-urlencoded", "html")


@dataclass
class FetchResult:
    url: str
    status: int
    content_type: str
    body: str | None
    truncated: bool
    size: int

    def to_json(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "status": self.status,
            "content_type": self.content_type,
            "body": self.body,
            "truncated": self.truncated,
        }


def check_url(url: str, *, allow_private: bool, skill: str = "http-fetch") -> None:
    """Refuse non-http(s) URLs and, unless ``allow_private``, private addresses
    (:class:`PermissionDenied`); a host that does not resolve is an ``OSError``, like
    any other network failure."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise PermissionDenied(skill, f"only http and https URLs are fetched, not {url!r}", resource=url)
    if allow_private:
        return
    try:
        infos = socket.getaddrinfo(parts.hostname, parts.port or (443 if parts.scheme == "https" else 80))
    except socket.gaierror as exc:  # a network failure, as a refused connection is: nothing was refused
        raise OSError(f"cannot resolve {parts.hostname}: {exc.strerror or exc}") from None
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        hidden = _embedded_ipv4(address)
        if not _public(address, hidden):
            shown = f"{address} ({', '.join(map(str, hidden))})" if hidden else str(address)
            raise PermissionDenied(
                skill,
                f"{parts.hostname} resolves to non-public address {shown}",
                rule="security.http.allow_private",
                resource=url,
            )


_NAT64 = ipaddress.ip_network("64:ff9b::/96")  # RFC 6052 well-known prefix
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")  # RFC 8215 local use: maps whatever the site says
_COMPATIBLE = ipaddress.ip_network("::/96")  # deprecated IPv4-compatible ::a.b.c.d


def _embedded_ipv4(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries: IPv4-mapped, IPv4-compatible,
    NAT64, 6to4 and Teredo forms all reach an IPv4 host, often without saying so."""
    if not isinstance(address, ipaddress.IPv6Address):
        return []
    found = [address.ipv4_mapped, address.sixtofour, *(address.teredo or ())]
    if address in _NAT64 or (address in _COMPATIBLE and int(address) > 1):
        found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return [a for a in found if a is not None]


def _public(address: ipaddress.IPv4Address | ipaddress.IPv6Address, hidden: list[ipaddress.IPv4Address]) -> bool:
    """Whether ``address`` is a public unicast address, judging every IPv4 address it
    embeds too; the special IPv6 ranges themselves do not count as public."""
    if address in _NAT64_LOCAL:
        return False
    special = address.is_multicast or address.is_unspecified or address.is_loopback or address.is_link_local
    if special or not all(_public(ipv4, []) for ipv4 in hidden):
        return False
    if isinstance(address, ipaddress.IPv6Address) and hidden and (
        address.ipv4_mapped or address in _NAT64 or address in _COMPATIBLE
    ):
        return True  # only a translation of the IPv4 address just judged
    site_local = isinstance(address, ipaddress.IPv6Address) and address.is_site_local
    return address.is_global and not address.is_reserved and not site_local


class _Redirects(urllib.request.HTTPRedirectHandler):
    def __init__(self, allow_private: bool) -> None:
        self.allow_private = allow_private

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> Any:
        check_url(newurl, allow_private=self.allow_private)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def fetch(
    url: str,
    *,
    method: str = "GET",
    headers: Mapping[str, str] | None = None,
    timeout: float = 30,
    max_bytes: int = 1024 * 1024,
    allow_private: bool = False,
) -> FetchResult:
    """Fetch ``url`` (blocking; run it in a thread). HTTP error statuses are results,
    not exceptions; network failures raise ``OSError``."""
    check_url(url, allow_private=allow_private)
    opener = urllib.request.build_opener(_Redirects(allow_private))
    request = urllib.request.Request(url, method=method, headers={"User-Agent": USER_AGENT, **(headers or {})})
    try:
        response = opener.open(request, timeout=timeout)
    except urllib.error.HTTPError as exc:
        location = exc.headers.get("Location") if 300 <= exc.code < 400 and exc.headers else None
        if location:  # a redirect urllib would not follow (another scheme): say why
            check_url(urllib.parse.urljoin(exc.geturl() or url, location), allow_private=allow_private)
        response = exc
    with response:
        data = response.read(max_bytes + 1) if method != "HEAD" else b""
        content_type = response.headers.get("Content-Type", "") or ""
        charset = response.headers.get_content_charset() or "utf-8"
        final = response.geturl() if hasattr(response, "geturl") else url
        status = response.status if getattr(response, "status", None) is not None else response.code
    truncated = len(data) > max_bytes
    data = data[:max_bytes]
    textual = content_type.startswith("text/") or any(t in content_type for t in _TEXTUAL)
    if not textual and (content_type or b"\x00" in data[:4096]):
        body = None
    else:
        body = data.decode(charset, errors="replace")
        if truncated:
            body += f"\n[body truncated by agent-apps at {max_bytes} bytes (max_kb)]"
    return FetchResult(final, int(status), content_type, body, truncated, len(data))
