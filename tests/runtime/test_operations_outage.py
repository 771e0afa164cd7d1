"""The serving process's operations thread while the database is away: the
outage is said once, in one line without a traceback, and so is its end,
however many times the thread looks in between."""

from __future__ import annotations

import logging

from sqlalchemy import exc as sa_exc
from support.waiting import wait_until

from pgbus_web.runtime import operation_runner

POLL = 0.02


class Flaky:
    """The test engine, refusing connections while *down*."""

    def __init__(self, engine):
        self.engine = engine
        self.down = True
        self.looks = 0

    def connect(self):
        self.looks += 1
        if self.down:
            raise sa_exc.OperationalError("SELECT 1", {}, OSError("connection refused\nIs the server running?"))
        return self.engine.connect()

    def __getattr__(self, name):
        return getattr(self.engine, name)


def _wait(predicate, timeout=60.0):
    return wait_until(predicate, timeout=timeout, what="the thread's looks", every=POLL)


def test_an_outage_and_its_end_are_logged_once_each(engine, caplog):
    flaky = Flaky(engine)
    caplog.set_level(logging.INFO, logger="pgbus_web.operations")
    background = operation_runner.Background(flaky, poll=POLL).start()
    try:
        assert _wait(lambda: flaky.looks >= 10)
        down = [record for record in caplog.records if record.name == "pgbus_web.operations"]
        assert len(down) == 1, [record.getMessage() for record in down]
        assert down[0].exc_info is None and down[0].levelno == logging.WARNING
        assert down[0].getMessage() == (
            f"operations: the database is unavailable (connection refused); trying again every {POLL:.1f}s"
        )
        flaky.down = False
        looked = flaky.looks
        assert _wait(lambda: flaky.looks >= looked + 10)
        messages = [record.getMessage() for record in caplog.records if record.name == "pgbus_web.operations"]
        assert messages[1:] == ["operations: the database is back"]
        # A second outage is a second line.
        flaky.down = True
        looked = flaky.looks
        assert _wait(lambda: flaky.looks >= looked + 10)
        messages = [record.getMessage() for record in caplog.records if record.name == "pgbus_web.operations"]
        assert len(messages) == 3 and "unavailable" in messages[2]
    finally:
        background.stop(timeout=5)
    assert not background.thread.is_alive()
