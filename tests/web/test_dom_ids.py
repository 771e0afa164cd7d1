"""Row ids derived from run ids and group keys: safe in HTML and CSS,
different for different runs, a uuid kept readable."""

from __future__ import annotations

import re

from pgbus_web.web.drawing import dom_ids

SAFE = re.compile(r"[A-Za-z0-9_.-]+")


def test_a_uuid_stays_as_it_is():
    run_id = "06900eb1-4664-493f-a958-8d75608aa886"
    assert dom_ids.run_row_id(run_id) == f"pgbus-row-run-{run_id}"


def test_odd_run_ids_become_safe_and_stay_apart():
    odd = ["orders/1042", "a b", "a_20b", 'x"><script>', "bulk", "æøå", "日本", "", "_", "a.b", "-"]
    ids = [dom_ids.run_row_id(run_id) for run_id in odd]
    assert all(SAFE.fullmatch(value) for value in ids)
    assert len(set(ids)) == len(ids)


def test_a_groups_parts_do_not_run_into_each_other():
    one = {"workflow_class": "A.b", "step_name": "c", "reason": "paused_error", "error_class": None}
    two = {"workflow_class": "A", "step_name": "b.c", "reason": "paused_error", "error_class": None}
    assert dom_ids.group_row_id(one) != dom_ids.group_row_id(two)
    assert dom_ids.group_row_id(one).startswith("pgbus-row-group-")
