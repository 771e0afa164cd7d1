"""The bounds of stored values, each written once: what a column can
hold, read by the checks that refuse a value before it is written."""

from __future__ import annotations

# pgbus_workflow_steps.attempt is an integer: a step whose counter is here
# cannot be attempted again (a new row would overflow the column).
ATTEMPT_MAX = 2**31 - 1
# The lowest id a bigserial gives: 0 or below names nothing.
ID_MIN = 1
# The highest id a bigserial gives (runs' and steps' ids, events', operations',
# a PGMQ message's): a larger number names nothing, and PostgreSQL would
# refuse the query rather than answer none.
ID_MAX = 2**63 - 1
# Characters of a reason (the audit trail's, an operation's and its
# changes', the policy's history): the columns' CHECK (char_length <= 1000).
# The doors refuse a longer one (core/checks.py); a runtime caller's is
# cut to it with an ellipsis (models/text.truncate), never refused.
REASON_LIMIT = 1_000
# An operation's highest pace, runs per second: the column's CHECK
# (pgbus_web_operations.rate <= 100000); a door refuses a faster one
# (core/checks.py), and the policy's highest rate is at most this.
RATE_MAX = 100_000
