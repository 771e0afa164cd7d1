"""The API's successful answers: JSON, never cached."""

from __future__ import annotations

import json
from typing import Any

from flask import Response

from ..core.representations import plain


def json_answer(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    response = Response(json.dumps(plain(body), ensure_ascii=False), status, mimetype="application/json")
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response
