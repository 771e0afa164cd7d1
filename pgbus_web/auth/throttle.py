"""Sign-in attempts, throttled in PostgreSQL so that every process of the
server counts the same attempts, and reserved before the password is
checked so that concurrent attempts cannot outrun the count.

Three counts over a 15-minute window (starting at a key's first attempt):

- a name from one address: PER_NAME_ADDRESS attempts; past them that
  address may not try that name again until the window passes. Keyed by
  the pair, so guesses from one address never lock the name out from
  another address.
- one address, over all names: PER_ADDRESS attempts.
- a name from anywhere: past PER_NAME attempts the name is under attack,
  and only slows: an address that has already tried it in the window gets
  no further attempt, while an address that has not may still try, so the
  right password from a fresh address always gets through.

An attempt that succeeds is given back to every count (and clears its
pair); one that fails stays counted. The address is the client's as the
app sees it: behind a trusted proxy, the one from its X-Forwarded-For
(plumbing/forwarded.py), else the connecting peer.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy.engine import Engine

from ..models import sign_in_throttle as rows
from ..plumbing.state import state

PER_NAME_ADDRESS = 5
PER_ADDRESS = 20
PER_NAME = 50
WINDOW = timedelta(minutes=15)
# Longest part of a name kept in a key: longer names share a key, which
# only makes them throttled sooner.
KEY_NAME = 128
# One reservation in PRUNE_ODDS deletes rows whose window has passed.
PRUNE_ODDS = 64


class _Refused(Exception):
    pass


@dataclass(frozen=True)
class Reservation:
    """An attempt counted for (name, address); give it back on success."""

    keys: tuple[str, str, str]  # name, pair, address: the order rows are locked in


def _digest(*parts: str) -> str:
    # A digest, not the text: a name may hold any character (NUL included,
    # which PostgreSQL text refuses), and the table keeps no typed names.
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:40]


def _keys(name: str, address: str) -> tuple[str, str, str]:
    folded = name.lower()[:KEY_NAME]
    return f"name:{_digest(folded)}", f"pair:{_digest(address, folded)}", f"address:{_digest(address)}"


class Throttle:
    def __init__(
        self,
        engine: Callable[[], Engine] | None = None,
        *,
        per_name_address: int = PER_NAME_ADDRESS,
        per_address: int = PER_ADDRESS,
        per_name: int = PER_NAME,
        window: timedelta = WINDOW,
    ) -> None:
        self._engine = engine
        self.per_name_address = per_name_address
        self.per_address = per_address
        self.per_name = per_name
        self.window = window

    def engine(self) -> Engine:
        if self._engine is not None:
            return self._engine()
        return state().database.primary  # the app's database, at request time

    def reserve(self, name: str, address: str) -> Reservation | None:
        """Count an attempt for *name* from *address* before its password is
        checked, or None (nothing counted) when a limit is reached. One
        transaction, rows locked always in the same order (name, pair,
        address), so concurrent sign-ins take turns and never deadlock."""
        keys = _keys(name, address)
        name_key, pair_key, address_key = keys
        engine = self.engine()
        try:
            with engine.begin() as conn:
                # The name's count is taken even when the name is hot: it
                # never refuses by itself, it only tightens the pair's limit.
                seen = rows.reserve(conn, name_key, limit=2**31 - 1, window=self.window)
                # Never None: the name's own limit is never reached.
                pair_limit = 1 if seen is not None and seen > self.per_name else self.per_name_address
                if rows.reserve(conn, pair_key, limit=pair_limit, window=self.window) is None:
                    raise _Refused
                if rows.reserve(conn, address_key, limit=self.per_address, window=self.window) is None:
                    raise _Refused
        except _Refused:
            return None  # rolled back: a refused attempt counts nowhere
        if random.randrange(PRUNE_ODDS) == 0:
            with engine.begin() as conn:
                rows.prune(conn, window=self.window)
        return Reservation(keys)

    def succeeded(self, reservation: Reservation) -> None:
        name_key, pair_key, address_key = reservation.keys
        with self.engine().begin() as conn:
            rows.release(conn, name_key)
            rows.clear(conn, pair_key)
            rows.release(conn, address_key)
