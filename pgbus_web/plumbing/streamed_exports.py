"""A filtered set's export as an HTTP answer, streamed: the same body and
headers from the pages and the API."""

from __future__ import annotations

from flask import Response, stream_with_context

from ..core import exports


def export_response(made: exports.Export, **more_headers: str) -> Response:
    """*made* streamed under its content type, as an attachment named for
    it, with the ceiling it stopped at; *more_headers* after those."""
    return Response(
        stream_with_context(made.chunks),
        content_type=made.content_type,
        headers={
            "Content-Disposition": exports.content_disposition(made.filename),
            "X-Pgbus-Export-Ceiling-Id": str(made.ceiling_id),
            **more_headers,
        },
    )
