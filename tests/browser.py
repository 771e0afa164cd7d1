"""What the browser tests share: Debian's Chromium driven by Playwright
(never a downloaded browser), and the dashboard served on a free port."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from pathlib import Path

import pytest
from werkzeug.serving import make_server

CHROMIUM = Path("/usr/bin/chromium")
# Headless as root on a closed network: no sandbox, no GPU, and none of the
# background connections a closed network refuses.
LAUNCH_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# How long the browser waits for an answer to show (ms): generous for a
# loaded CI machine, still short when something is really wrong.
WAIT_MS = 15_000

requires_chromium = pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed")


def serve(app):
    """Serve *app* on a free port in a thread; yields its base URL (use with
    ``yield from`` in a fixture)."""
    httpd = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_port}"
    finally:
        httpd.shutdown()
        thread.join(timeout=10)


@contextmanager
def launched():
    """One headless Chromium; each test opens its own context in it."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()
