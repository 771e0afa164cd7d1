"""What the browser tests share: Debian's Chromium driven by Playwright
(never a downloaded browser), and the dashboard served on a free port."""

from __future__ import annotations

import os
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


def _missing_chromium_in_ci() -> bool:
    """In CI (CI set to true) a browser test that cannot run must fail the
    run, not skip: a skipped browser test proves nothing."""
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


# Outside CI, a machine without Debian's chromium skips the browser tests
# and says why; in CI the tests run and fail at the launch instead.
requires_chromium = pytest.mark.skipif(
    not CHROMIUM.exists() and not _missing_chromium_in_ci(),
    reason="Debian's chromium is not installed (apt-get install chromium)",
)


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
    """One headless Chromium (the session's ``chromium`` fixture, conftest.py)."""
    from playwright.sync_api import sync_playwright

    if not CHROMIUM.exists():
        pytest.fail(f"Debian's chromium is not installed at {CHROMIUM}: browser tests cannot run")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()


# axe-core, vendored as a test asset (scripts/vendor_assets.sh; never served).
AXE = Path(__file__).parent.parent / "vendor" / "axe.min.js"
# The rules the pages are held to: WCAG 2.2 A and AA (target size among
# them) and axe's best practices.
AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa", "best-practice"]


def axe_violations(page) -> list[str]:
    """axe-core's violations on *page* as it is now, one line each (rule,
    impact, the first nodes' selectors and axe's summary); [] when clean.
    axe is evaluated through the DevTools protocol, so the page's
    Content-Security-Policy (no inline script) stays as it is."""
    if page.evaluate("typeof window.axe") != "object":
        page.evaluate(AXE.read_text(encoding="utf-8"))
    results = page.evaluate(
        "async (tags) => (await axe.run(document, {runOnly: {type: 'tag', values: tags}, resultTypes: ['violations']}))"
        ".violations.map(v => ({id: v.id, impact: v.impact, nodes: v.nodes.slice(0, 4).map(n => ({"
        " target: n.target.join(' '), summary: n.failureSummary}))}))",
        AXE_TAGS,
    )
    return [
        f"{v['id']} ({v['impact']}): " + " | ".join(f"{n['target']}: {n['summary']}" for n in v["nodes"])
        for v in results
    ]
