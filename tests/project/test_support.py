"""The shared test helpers themselves: the snapshot sees every write, the
driver reaches each starting point, the browser holds a CSRF token."""

from __future__ import annotations

from support.runtime_support import snapshot

from pgbus_web.demo import workflows as demo
from pgbus_web.plumbing import csrf


def test_snapshot_sees_every_written_row(engine, driver):
    before = snapshot(engine)
    driver.start(demo.REFUND, {"refund_id": 1})
    after = snapshot(engine)
    assert before != after
    assert len(after["pgbus_workflows"]) == 1
    assert len(after["pgbus_workflow_events"]) == 2


def test_driver_brings_a_run_to_each_starting_point(driver):
    assert driver.status(driver.paused_on_capture()) == "paused"
    assert driver.status(driver.waiting_for_shipment()) == "waiting"
    assert driver.status(driver.ready_with_timer()) == "ready"
    assert driver.status(driver.completed()) == "completed"


def test_browser_reads_its_token_from_the_page(browser):
    browser.load()
    assert browser.token
    assert browser.client.get_cookie(csrf.COOKIE_NAME) is not None


def test_in_ci_a_missing_chromium_fails_the_browser_tests(monkeypatch, tmp_path):
    import pytest
    from support import browser

    monkeypatch.setattr(browser, "CHROMIUM", tmp_path / "no-chromium")
    monkeypatch.setenv("CI", "true")
    assert browser._missing_chromium_in_ci()
    with pytest.raises(pytest.fail.Exception, match="chromium is not installed"):
        with browser.launched():
            pass
    # Control: outside CI the same machine only skips.
    monkeypatch.delenv("CI")
    assert not browser._missing_chromium_in_ci()


def test_one_chromium_for_the_whole_suite():
    """Every browser test takes the session's `chromium` fixture
    (conftest.py); a module launching its own would start another
    browser per module. The control: the fixture itself is found."""
    import re
    from pathlib import Path

    tests = Path(__file__).resolve().parents[1]
    launching = re.compile(r"\blaunched\(\)|\bdef chromium\(")
    found = {
        path.relative_to(tests).as_posix()
        for path in tests.rglob("*.py")
        if "vendor" not in path.parts and launching.search(path.read_text(encoding="utf-8"))
    }
    # support/browser.py defines launched(), conftest.py the one fixture,
    # and this file tests the launch itself (and names the pattern).
    assert found == {"support/browser.py", "conftest.py", "project/test_support.py"}, found
