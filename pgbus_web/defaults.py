"""Defaults shared by the dashboard, the worker and the seeder."""

from datetime import timedelta

# A step in progress (or a ready step overdue) this long needs a person.
STALL_THRESHOLD = timedelta(minutes=10)
# A worker silent this long is gone (well below STALL_THRESHOLD: its runs
# are flagged minutes before they are stalled). Workers beat every 5 s.
WORKER_GONE_AFTER = timedelta(seconds=30)
# A run waiting this long on a wait without a deadline needs a person.
WAITING_THRESHOLD = timedelta(hours=24)
# The reaper's age floor: a uniqueness lock acquired less than this ago is
# never reaped. A lock is taken before its message is sent and bound after,
# and a retry's sits unbound between the hand-over and its bind; an hour is
# far longer than either gap, so a lock the floor spares is one in flight.
LOCK_AGE_FLOOR = timedelta(hours=1)
# An operation whose holder has not renewed its heartbeat for this long is
# taken over by another process (its holder renews it every third of this,
# between chunks and while one is long): a killed `pgbus-web bulk` or
# worker costs this long, not a minute.
OPERATION_STALE_AFTER = timedelta(seconds=15)
