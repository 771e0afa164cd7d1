"""HTMX on the server side: the HX-* request headers read through one small
object, and the one response helper every answer goes through.

Every blueprint response carries ``Vary: HX-Request``: the same URL answers
with a whole page or with a fragment, and a cache must keep them apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote

from flask import Response, g, request
from werkzeug.datastructures import Headers

VARY_HEADER = "HX-Request"
# The one mark of a refusal the pages draw to be shown: an htmx answer
# with a 4xx status that carries this header is swapped like a success
# (actions.js); how it swaps is the server's (HX-Reswap where a dialog
# must keep what was typed). Any other error answer is left unswapped.
REFUSAL_HEADER = "X-Pgbus-Refusal"


def _header(headers: Mapping[str, str] | Headers, name: str) -> str | None:
    value = headers.get(name)
    if value is None:
        return None
    # htmx URI-encodes a header value that is not plain ASCII and says so.
    if headers.get(f"{name}-URI-AutoEncoded") == "true":
        return unquote(value)
    return value


@dataclass(frozen=True)
class HtmxDetails:
    """What htmx told us about the request that is being answered."""

    request: bool = False
    boosted: bool = False
    target: str | None = None
    trigger: str | None = None
    trigger_name: str | None = None
    current_url: str | None = None
    history_restore_request: bool = False
    prompt: str | None = None

    @classmethod
    def from_headers(cls, headers: Mapping[str, str] | Headers) -> HtmxDetails:
        return cls(
            request=headers.get("HX-Request") == "true",
            boosted=headers.get("HX-Boosted") == "true",
            target=_header(headers, "HX-Target"),
            trigger=_header(headers, "HX-Trigger"),
            trigger_name=_header(headers, "HX-Trigger-Name"),
            current_url=_header(headers, "HX-Current-URL"),
            history_restore_request=headers.get("HX-History-Restore-Request") == "true",
            prompt=_header(headers, "HX-Prompt"),
        )

    @property
    def wants_fragment(self) -> bool:
        """True for a request htmx sent to swap part of a page. A boosted
        request and a history restore want the whole page."""
        return self.request and not self.boosted and not self.history_restore_request


def details() -> HtmxDetails:
    """The current request's HTMX details, read once per request."""
    found = g.get("_pgbus_htmx")
    if found is None:
        found = HtmxDetails.from_headers(request.headers)
        g._pgbus_htmx = found
    return found


def vary_on_hx_request(response: Response) -> Response:
    response.vary.add(VARY_HEADER)
    return response
