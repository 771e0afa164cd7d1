"""Two `pgbus-web serve` processes and a worker on one database, with one
secret key, behave as one dashboard (docs/standalone.md, "Several
instances"): a session made on one is good on the other, and a sign-out on
one ends it on both; the sign-in throttle counts the attempts made on both;
a CSRF token from a page of one is good on the other; an operation started
through one is carried out once, whichever process takes it; and /metrics
on both reports the same run counts once each has read the database again.

Real processes on real sockets, as a deployment behind a load balancer
runs them. Every wait is for a state, with a generous deadline; no
assertion is on how long anything took."""

from __future__ import annotations

import base64
from urllib.parse import urlencode

import sqlalchemy as sa
from prometheus_client.parser import text_string_to_metric_families
from support.auth_support import OPERATOR, VIEWER
from support.instances import Client, csrf_token, eventually, page_of, sign_in, signed_in_as
from support.operation_support import seed_paused

from pgbus_web.auth import throttle
from pgbus_web.plumbing import csrf

# Enough runs for several chunks of an operation: a cancel takes the chunk
# path, whose chunks hold runtime/operation_runner.CHUNK_PATH runs.
RUNS = 2_500


def run_counts(port: int) -> dict[tuple[str, str], float]:
    """pgbus_workflow_runs from the instance at *port*, read as a viewer."""
    basic = "Basic " + base64.b64encode(f"{VIEWER[0]}:{VIEWER[1]}".encode()).decode()
    status, _, text = Client().get(port, "/metrics", headers={"Authorization": basic, "Accept": "text/plain"})
    assert status == 200, text
    return {
        (sample.labels["workflow_class"], sample.labels["status"]): sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "pgbus_workflow_runs"
        for sample in family.samples
    }


def database_counts(engine) -> dict[tuple[str, str], float]:
    with engine.connect() as conn:
        found = dict(
            ((klass, status), float(n))
            for klass, status, n in conn.execute(
                sa.text("SELECT workflow_class, status, count(*) FROM pgbus_workflows GROUP BY 1, 2")
            )
        )
    return found


def test_two_instances_and_a_worker_behave_as_one(instances):
    engine, a, b = instances
    seed_paused(engine, RUNS)
    with engine.connect() as conn:
        [one_run] = conn.execute(sa.text("SELECT workflow_id FROM pgbus_workflows ORDER BY id LIMIT 1")).scalars()

    # A session made on A is good on B.
    otto = Client()
    assert sign_in(otto, a, *OPERATOR) == 303
    assert OPERATOR[0] in (signed_in_as(otto, b) or "")

    # A CSRF token from a page of A is good for an action posted to B.
    status, _, text = otto.get(a, f"/workflows/{one_run}")
    assert status == 200
    status, _, text = otto.post(
        b, f"/workflows/{one_run}/cancel", {csrf.FIELD_NAME: csrf_token(text), "reason": "customer left"}
    )
    assert status in (200, 303), text
    with engine.connect() as conn:
        assert (
            conn.execute(
                sa.text("SELECT status FROM pgbus_workflows WHERE workflow_id = :id"), {"id": one_run}
            ).scalar_one()
            == "cancelled"
        )

    # An operation started through A is done once: by the worker or either instance.
    status, _, text = otto.get(a, "/workflows")
    form = {
        csrf.FIELD_NAME: csrf_token(text),
        "verb": "cancel",
        "query": urlencode({"status": "paused"}),
        "expected": str(RUNS - 1),
        "confirmed": "1",
        "reason": "gateway gone",
    }
    status, headers, text = otto.post(a, "/workflows/operations", form)
    assert status == 303, text
    operation_id = int(headers["Location"].rstrip("/").rsplit("/", 1)[1])

    def finished():
        with engine.connect() as conn:
            found = conn.execute(
                sa.text("SELECT status, moved FROM pgbus_web_operations WHERE id = :id"), {"id": operation_id}
            ).one()
        return tuple(found) if found[0] not in ("queued", "running") else None

    assert eventually(finished, "the operation ends") == ("done", RUNS - 1)
    with engine.connect() as conn:
        acted = conn.execute(
            sa.text(
                "SELECT workflow_id, count(*) FROM pgbus_workflow_events "
                "WHERE details ->> 'operation_id' = :op GROUP BY workflow_id"
            ),
            {"op": str(operation_id)},
        ).all()
        left = conn.execute(sa.text("SELECT count(*) FROM pgbus_workflows WHERE status <> 'cancelled'")).scalar_one()
    assert len(acted) == RUNS - 1 and {count for _, count in acted} == {1}
    assert left == 0

    # /metrics: each instance reads on its own interval; once both have
    # read since the operation ended, they report the same counts, the
    # database's.
    expected = database_counts(engine)
    assert expected == {("OrderWorkflow", "cancelled"): float(RUNS)}

    def agreeing():
        found_a, found_b = run_counts(a), run_counts(b)
        nonzero = {key: value for key, value in found_a.items() if value}
        return found_a == found_b and nonzero == expected and (found_a, found_b)

    eventually(agreeing, "both instances' /metrics report the database's run counts")

    # A sign-out on A ends the session on B too, the cookie's copy included.
    kept = dict(otto.cookies)
    status, _, text = otto.get(a, "/workflows")
    token = page_of(text).select_one("form.pgbus-sign-out input[name=token]")["value"]
    assert otto.post(a, "/sign-out", {"token": token})[0] == 303
    copy = Client()
    copy.cookies = kept
    assert signed_in_as(copy, b) is None
    assert signed_in_as(copy, a) is None


def test_the_sign_in_throttle_counts_the_attempts_made_on_both(instances):
    _, a, b = instances
    name = "mallory"
    # Alternating instances, never more than half the allowance on either.
    for attempt in range(throttle.PER_NAME_ADDRESS):
        port = (a, b)[attempt % 2]
        assert sign_in(Client(), port, name, f"guess {attempt}") == 401
    # Each has seen fewer than the allowance; together they have used it.
    assert sign_in(Client(), a, name, "one more guess") == 429
    assert sign_in(Client(), b, name, "one more guess") == 429
    # Control: another name from the same address is not throttled.
    assert sign_in(Client(), b, *VIEWER) == 303
