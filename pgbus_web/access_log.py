"""An access log for the standalone server: one line per request through
the ``pgbus_web.access`` logger, so it takes the same format and stream as
the app's own log lines (``pgbus-web serve`` sends them all to stdout).
The peer address, method, path with query, status, bytes and time; never a
header (no credentials, no cookies)."""

from __future__ import annotations

import logging
import time

log = logging.getLogger("pgbus_web.access")


class AccessLog:
    """WSGI middleware: logs each request when its answer has been sent
    (the server closes the body), with the time it took."""

    def __init__(self, app) -> None:
        self.app = app

    def __call__(self, environ, start_response):
        started = time.monotonic()
        seen: dict[str, str] = {}

        def recording_start_response(status, headers, exc_info=None):
            seen["status"] = status.split(" ", 1)[0]
            seen["length"] = next((v for k, v in headers if k.lower() == "content-length"), "-")
            return start_response(status, headers, exc_info)

        body = self.app(environ, recording_start_response)
        return _Body(body, lambda: _line(environ, seen, started))


class _Body:
    """The app's body, passed through; its close() also writes the line."""

    def __init__(self, body, done) -> None:
        self._body = body
        self._done = done

    def __iter__(self):
        return iter(self._body)

    def close(self) -> None:
        try:
            close = getattr(self._body, "close", None)
            if close is not None:
                close()
        finally:
            self._done()


def _line(environ, seen, started) -> None:
    path = environ.get("PATH_INFO", "")
    if environ.get("QUERY_STRING"):
        path += "?" + environ["QUERY_STRING"]
    log.info(
        '%s "%s %s" %s %s %.0fms',
        environ.get("REMOTE_ADDR", "-"),
        environ.get("REQUEST_METHOD", "-"),
        # Escaped: a path cannot forge a second log line.
        path.encode("unicode_escape").decode("ascii")[:2000],
        seen.get("status", "-"),
        seen.get("length", "-"),
        (time.monotonic() - started) * 1000,
    )
