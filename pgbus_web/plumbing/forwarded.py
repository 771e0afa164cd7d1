"""Which X-Forwarded-* headers the standalone app believes.

ProxyFix (``trusted_proxies=N``) takes the last N values of each
X-Forwarded-* header, but cannot tell who sent the request: any client
that reaches the server directly could claim HTTPS, an address or a
prefix. This middleware, in front of ProxyFix, keeps those headers only
when the connecting peer is one of the trusted proxy addresses, and drops
them otherwise; an X-Forwarded-Prefix is kept only when it is a plain path
of this site, since it becomes the start of every link and form action.
"""

from __future__ import annotations

import ipaddress
import logging
import re

log = logging.getLogger(__name__)

# The environ keys of the headers ProxyFix reads, and the ones waitress
# knows (Forwarded, X-Forwarded-By), which nothing here reads.
HEADERS = (
    "HTTP_X_FORWARDED_FOR",
    "HTTP_X_FORWARDED_PROTO",
    "HTTP_X_FORWARDED_HOST",
    "HTTP_X_FORWARDED_PORT",
    "HTTP_X_FORWARDED_PREFIX",
    "HTTP_X_FORWARDED_BY",
    "HTTP_FORWARDED",
)
PREFIX = "HTTP_X_FORWARDED_PREFIX"
# Believed without --trusted-proxy: a proxy on the same machine.
LOOPBACK = ("127.0.0.0/8", "::1/128")
# One or more path segments of RFC 3986 characters: a single leading "/",
# no empty segment ("//host"), no backslash, no control character, no
# query or fragment; a trailing "/" is allowed (ProxyFix strips it).
_SAFE_PREFIX = re.compile(r"(?:/[A-Za-z0-9._~!$&'()*+,;=:@%-]+)+/?")


def networks(cidrs) -> tuple:
    found = []
    for cidr in cidrs:
        try:
            found.append(ipaddress.ip_network(str(cidr).strip(), strict=False))
        except ValueError:
            raise ValueError(
                f"invalid --trusted-proxy {cidr!r}: expected an address or CIDR, e.g. 10.0.0.0/8"
            ) from None
    return tuple(found)


def safe_prefix(value: str) -> bool:
    return bool(_SAFE_PREFIX.fullmatch(value)) and "//" not in value


def _chosen(value: str, count: int) -> str | None:
    """The value ProxyFix takes from a comma-separated header: the
    *count*-th from the right, or None when there are fewer."""
    values = [part.strip() for part in value.split(",")]
    return values[-count] if len(values) >= count else None


class ForwardedGate:
    """WSGI middleware: the X-Forwarded-* headers reach *app* only from a
    peer in *proxies* (networks), and then only with a safe prefix."""

    def __init__(self, app, proxies, count: int) -> None:
        self.app = app
        self.proxies = networks(proxies)
        self.count = count

    def trusted(self, environ) -> bool:
        if not self.count:
            return False
        try:
            address = ipaddress.ip_address((environ.get("REMOTE_ADDR") or "").strip("[]").split("%", 1)[0])
        except ValueError:
            return False
        return any(address in network for network in self.proxies)

    def __call__(self, environ, start_response):
        if not self.trusted(environ):
            for key in HEADERS:
                environ.pop(key, None)
        elif PREFIX in environ:
            chosen = _chosen(environ[PREFIX], self.count)
            if chosen is not None and not safe_prefix(chosen):
                log.warning(
                    "pgbus-web: ignored X-Forwarded-Prefix %r from %s: not a plain path of this site",
                    chosen[:200],
                    environ.get("REMOTE_ADDR"),
                )
                del environ[PREFIX]
        return self.app(environ, start_response)
