"""Defaults shared by the dashboard, the worker and the seeder."""

from datetime import timedelta

# A step in progress (or a ready step overdue) this long needs a person.
STALL_THRESHOLD = timedelta(minutes=10)
# A run waiting this long on a wait without a deadline needs a person.
WAITING_THRESHOLD = timedelta(hours=24)
