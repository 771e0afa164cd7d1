"""A waitress server run in a thread for a test, closed at the end."""

from __future__ import annotations

import threading
from contextlib import contextmanager


@contextmanager
def running(server):
    """Serve with *server* (``waitress.create_server(...)``) in a thread;
    yields its port. Closing the sockets under its loop ends the loop with
    EBADF, which is how it stops here."""
    closing = threading.Event()

    def run():
        try:
            server.run()
        except OSError:
            if not closing.is_set():
                raise

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield server.effective_port
    finally:
        closing.set()
        server.close()
        thread.join(timeout=10)
