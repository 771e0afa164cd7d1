"""Failed sign-ins, counted per user name and per client address over a
sliding window: past the limit, further attempts for that name or from that
address are refused without checking the password until old failures leave
the window. In memory, per process (several processes each count their own).
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict, deque

# Failures of one name, and from one address, within WINDOW seconds.
PER_USER = 5
PER_ADDRESS = 20
WINDOW = 15 * 60


class Throttle:
    def __init__(self, per_user: int = PER_USER, per_address: int = PER_ADDRESS, window: float = WINDOW,
                 clock=time.monotonic) -> None:
        self.per_user = per_user
        self.per_address = per_address
        self.window = window
        self.clock = clock
        self._failures: dict[tuple[str, str], deque] = defaultdict(deque)
        self._lock = threading.Lock()

    def _recent(self, key: tuple[str, str]) -> deque:
        failures = self._failures[key]
        cutoff = self.clock() - self.window
        while failures and failures[0] <= cutoff:
            failures.popleft()
        if not failures:
            del self._failures[key]
            return deque()
        return failures

    def blocked(self, user: str, address: str) -> bool:
        """True when this name or this address has used up its attempts."""
        with self._lock:
            return (
                len(self._recent(("user", user.lower()))) >= self.per_user
                or len(self._recent(("address", address))) >= self.per_address
            )

    def failed(self, user: str, address: str) -> None:
        now = self.clock()
        with self._lock:
            self._failures[("user", user.lower())].append(now)
            self._failures[("address", address)].append(now)

    def succeeded(self, user: str) -> None:
        with self._lock:
            self._failures.pop(("user", user.lower()), None)
