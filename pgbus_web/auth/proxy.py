"""An auth proxy's word (oauth2-proxy and the like): the user's name, and
optionally their role, in request headers, believed only when the request
comes straight from one of the trusted proxy addresses. From anywhere else
the headers are ignored, as if absent.
"""

from __future__ import annotations

import ipaddress
import logging
from dataclasses import dataclass

from ..plumbing import forwarded
from .users import NAME, ROLES, VIEWER, UsersFile

log = logging.getLogger(__name__)


def networks(cidrs) -> tuple:
    """The CIDRs as networks; ValueError names a bad one."""
    return forwarded.networks(cidrs)


def peer(environ) -> str:
    """The address of the machine that connected to us: before ProxyFix
    rewrote REMOTE_ADDR from X-Forwarded-For, which anyone can send."""
    original = environ.get("werkzeug.proxy_fix.orig") or {}
    return original.get("REMOTE_ADDR") or environ.get("REMOTE_ADDR") or ""


@dataclass(frozen=True)
class TrustedHeader:
    header: str
    role_header: str | None
    proxies: tuple
    default_role: str = VIEWER

    def trusts(self, environ) -> bool:
        try:
            address = ipaddress.ip_address(peer(environ).split("%", 1)[0])
        except ValueError:
            return False
        return any(address in network for network in self.proxies)

    def identify(self, request, users: UsersFile | None) -> tuple[str, str] | None:
        """(name, role) from the headers of a trusted proxy, else None.
        The role: the role header's, else the users file's for that name,
        else default_role."""
        name = (request.headers.get(self.header) or "").strip()
        if not name or not self.trusts(request.environ):
            return None
        if not NAME.match(name):
            log.warning(
                "pgbus-web: ignored the %s header from %s: not a valid user name", self.header, peer(request.environ)
            )
            return None
        role = (request.headers.get(self.role_header) or "").strip().lower() if self.role_header else ""
        if role not in ROLES:
            listed = users.get(name) if users else None
            role = listed.role if listed else self.default_role
        return name, role
