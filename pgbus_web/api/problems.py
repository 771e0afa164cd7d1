"""The API's refusals as RFC 9457 problem details
(``application/problem+json``): ``status``, ``title`` (the HTTP reason
phrase, for machines and logs) and ``detail`` (the operator's sentence,
translated to the request's language), plus ``field`` when a body field
is at fault and anything else a refusal carries (a count that changed
answers the fresh ``preview``)."""

from __future__ import annotations

import json
from typing import Any

from flask import Response
from werkzeug.http import HTTP_STATUS_CODES

from ..core.problems import Refusal
from ..core.representations import plain

MEDIA_TYPE = "application/problem+json"


def problem(
    status: int, detail: str, *, field: str | None = None, headers: dict[str, str] | None = None, **extra: Any
) -> Response:
    body: dict[str, Any] = {
        "type": "about:blank",
        "title": HTTP_STATUS_CODES.get(status, "Error"),
        "status": status,
        "detail": detail,
    }
    if field is not None:
        body["field"] = field
    body.update(plain(extra))
    response = Response(json.dumps(body, ensure_ascii=False), status, mimetype=MEDIA_TYPE)
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response


def from_refusal(refusal: Refusal, **extra: Any) -> Response:
    """What the pages would say (core/problems.py), as a problem."""
    return problem(refusal.status, refusal.message, field=refusal.field, **extra)
