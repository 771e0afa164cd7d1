"""The bounds of stored values, each written once: what a column can
hold, read by the checks that refuse a value before it is written."""

from __future__ import annotations

# pgbus_workflow_steps.attempt is an integer: a step whose counter is here
# cannot be attempted again (a new row would overflow the column).
ATTEMPT_MAX = 2**31 - 1
