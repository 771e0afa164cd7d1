"""The API's successful answers: JSON, never cached."""

from __future__ import annotations

import json
from typing import Any

from flask import Response

from ..core.representations import plain


def json_answer(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    # plain() for what JSON cannot write as it is (a moment, a Decimal),
    # as the encoder meets it: a body representations.py shaped is plain
    # already, and walking it again cost as much as shaping it.
    response = Response(json.dumps(body, ensure_ascii=False, default=plain), status, mimetype="application/json")
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response
