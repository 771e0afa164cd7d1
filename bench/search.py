"""The index's search box at a million runs: for each form the search
accepts (docs/search.md, Finding a run), the plan PostgreSQL chose for the runs index's own
query (models.workflow_index.page with ``search``), under EXPLAIN (ANALYZE,
BUFFERS), and the median wall time of several calls.

    python bench/search.py [--database-url postgresql://...] [--runs 1000000] [--repeat 7]

Without --database-url an embedded PostgreSQL is started in a temporary
directory. The benchmark makes its own database (``pgbus_bench_search``,
dropped and made again) and seeds --runs runs by set-based INSERTs
(bench/bulk_runs.py, shape MIXED): three classes and their subject types
(so each subject id is shared by three runs of different types), every
status, an idempotency key on every other run, random uuid run ids. No
step rows: the search reads the runs
table; the page's latest-step lookup costs one index probe per listed run
(docs/performance.md). Then it searches for one run near the middle by each
form, prints the plan of each, and checks each found that run; each form's
median is also given as a ratio to the whole run id's (one index probe,
the floor, measured in the same run). For the id fragments, the fragment's
own condition is timed alone twice, with the trigram index and with index
scans turned off (what the fragment would cost without pg_trgm), and the
ratio printed. Then the plan of the failed runs' groups
(models.workflow_attention.failed_groups: the kept counts by key and one
probe of the moments index per key).

The searches inside JSON (docs/search.md) follow: the runs carry
arguments (bench/bulk_runs.py's ARGUMENTS: a customer shared by 50 runs,
a nested order id, tags) and one run in ten a signal with a payload; each
search's plan, and its time through the API (GET /api/v1/runs, the whole
door: the request, the query, the JSON) beside the time of its SQL alone
(the statement the model sent, its rows fetched), with the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bulk_runs  # noqa: E402  (bench/bulk_runs.py)
import scratch
from queries import capture, timed  # noqa: E402  (bench/queries.py)

from pgbus_web import db, defaults, schema
from pgbus_web.core import tokens
from pgbus_web.models import workflow_attention, workflow_index, workflow_search
from pgbus_web.rules import run_filters

BENCH_DATABASE = "pgbus_bench_search"
THRESHOLDS = {"threshold": defaults.STALL_THRESHOLD, "waiting_threshold": defaults.WAITING_THRESHOLD}
PAGE_SIZE = 50
# The forms that find a run by a fragment from the middle or the end of its id.
FRAGMENT_FORMS = (
    "run id, 8 characters from the middle",
    "run id, its last 12 characters",
    "run id, 6 characters from the middle",
)


def explain_text(engine, statement: str, parameters) -> str:
    with engine.connect() as conn:
        cursor = conn.connection.dbapi_connection.cursor()
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + statement, parameters)
        lines = [row[0] for row in cursor.fetchall()]
        conn.rollback()
    return "\n".join(lines)


def search(bench_url: str, runs: int, repeat: int) -> None:
    engine = db.create_engine(bench_url)
    try:
        schema.install(engine)
        started = time.monotonic()
        bulk_runs.insert(bench_url, runs, bulk_runs.MIXED_WITH_ARGUMENTS)
        seed_signals(bench_url)
        print(f"seeded {runs:,} runs in {time.monotonic() - started:.1f}s (with VACUUM ANALYZE)\n")

        with engine.connect() as conn:
            target = (
                conn.execute(
                    sa.text(
                        "SELECT workflow_id, subject_type, subject_id, idempotency_key FROM pgbus_workflows "
                        "WHERE idempotency_key IS NOT NULL AND id >= :middle ORDER BY id LIMIT 1"
                    ),
                    {"middle": runs // 2},
                )
                .mappings()
                .one()
            )
        forms = [
            ("run id, whole", target["workflow_id"]),
            ("run id, upper case", target["workflow_id"].upper()),
            ("run id, the 8 characters the list shows", target["workflow_id"][:8]),
            ("run id, 4-character prefix", target["workflow_id"][:4]),
            ("run id, 8 characters from the middle", target["workflow_id"][10:18]),
            ("run id, its last 12 characters", target["workflow_id"][-12:]),
            ("run id, 6 characters from the middle", target["workflow_id"][15:21]),
            ("idempotency key, lower case", target["idempotency_key"].lower()),
            ("subject, type and id", f"{target['subject_type']} {target['subject_id']}"),
            ("subject, lower case", f"{target['subject_type'].lower()} {target['subject_id']}"),
            ("subject id alone", target["subject_id"]),
            ("nothing matches", "no-such-run-anywhere"),
        ]
        summary = []
        for label, text in forms:

            def call(conn, text=text):
                return workflow_index.page(conn, limit=PAGE_SIZE + 1, search=text, **THRESHOLDS)

            rows, statement, parameters = capture(engine, call)
            plan = explain_text(engine, statement, parameters)
            times = timed(engine, call, repeat)
            found = target["workflow_id"] in {row["workflow_id"] for row in rows}
            summary.append((label, text, len(rows), found, statistics.median(times), max(times)))
            print(
                f"== {label}: q={text!r}: {len(rows)} runs, target {'found' if found else 'NOT found'}; "
                f"median {statistics.median(times) * 1000:.2f} ms, slowest {max(times) * 1000:.2f} ms"
            )
            print(plan)
            print()
        floor = summary[0][4]
        # A fragment's own condition, with its index and without (a
        # sequential read of every run, what LIKE costs where pg_trgm is not).
        alone = []
        for label, fragment in forms:
            if label not in FRAGMENT_FORMS:
                continue
            pattern = {"pattern": "%" + workflow_search.like_literal(workflow_search.ascii_lower(fragment)) + "%"}
            statement = sa.text(
                'SELECT count(*) FROM pgbus_workflows WHERE lower(workflow_id COLLATE "C") LIKE :pattern'
            )

            def indexed(conn, pattern=pattern, statement=statement):
                return conn.execute(statement, pattern).scalar_one()

            def unindexed(conn, pattern=pattern, statement=statement):
                conn.execute(sa.text("SET LOCAL enable_bitmapscan = off"))
                conn.execute(sa.text("SET LOCAL enable_indexscan = off"))
                return conn.execute(statement, pattern).scalar_one()

            with_index = statistics.median(timed(engine, indexed, repeat))
            without = statistics.median(timed(engine, unindexed, repeat))
            alone.append((label, with_index, without))
        # The failed runs' groups beside the needs-attention groups (the
        # seed makes a tenth of the runs failed).
        groups, statement, parameters = capture(engine, lambda conn: workflow_attention.failed_groups(conn))
        times = timed(engine, lambda conn: workflow_attention.failed_groups(conn), repeat)
        print(
            f"== failed runs' groups: {len(groups)} groups of {sum(g['count'] for g in groups):,} runs; "
            f"median {statistics.median(times) * 1000:.2f} ms, slowest {max(times) * 1000:.2f} ms"
        )
        print(explain_text(engine, statement, parameters))
        print()
        print("summary (median / slowest of", repeat, "calls; the median as a ratio to the whole run id's):")
        for label, _text, count, found, median, slowest in summary:
            print(
                f"  {label:<42} {count:>3} runs  {'found' if found else '-':<5}  "
                f"{median * 1000:7.2f} ms / {slowest * 1000:7.2f} ms  {median / floor:5.1f}x"
            )
        print("a fragment's LIKE alone (median), with the trigram index and without index scans:")
        for label, with_index, without in alone:
            print(
                f"  {label:<42} {with_index * 1000:7.2f} ms  {without * 1000:8.2f} ms  "
                f"without the index {without / with_index:6.1f}x"
            )
        missed = [label for label, _, _, found, _, _ in summary if not found and label != "nothing matches"]
        json_searches(engine, bench_url, target["workflow_id"], repeat)
        if missed:
            raise SystemExit(f"not found by: {', '.join(missed)}")
    finally:
        engine.dispose()


SIGNALS = """
INSERT INTO pgbus_workflow_signals (workflow_id, name, payload, status)
SELECT workflow_id, 'shipment_confirmed',
       jsonb_build_object('carrier', CASE WHEN id % 20 = 0 THEN 'dhl' ELSE 'ups' END, 'tracking', 'T' || id),
       'consumed'
FROM pgbus_workflows WHERE id % 10 = 0
"""


def seed_signals(url: str) -> None:
    """One run in ten received a signal: a carrier and a tracking number."""
    engine = db.create_engine(url, db.UNBOUNDED_STATEMENTS, pool_size=1, max_overflow=0)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text(SIGNALS))
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("VACUUM ANALYZE pgbus_workflow_signals")
    finally:
        engine.dispose()


def sql_alone(engine, statement: str, parameters, repeat: int) -> list[float]:
    """The statement run and its rows fetched by the driver, nothing else."""
    times = []
    with engine.connect() as conn:
        cursor = conn.connection.dbapi_connection.cursor()
        cursor.execute(statement, parameters)
        cursor.fetchall()
        for _ in range(repeat):
            started = time.perf_counter()
            cursor.execute(statement, parameters)
            cursor.fetchall()
            times.append(time.perf_counter() - started)
        conn.rollback()
    return times


def json_searches(engine, bench_url: str, workflow_id: str, repeat: int) -> None:
    with engine.connect() as conn:
        target = (
            conn.execute(
                sa.text(
                    "SELECT id, arguments, (SELECT payload FROM pgbus_workflow_signals s"
                    " WHERE s.workflow_id = w.workflow_id LIMIT 1) AS payload"
                    " FROM pgbus_workflows w WHERE id >= (SELECT max(id) / 2 FROM pgbus_workflows)"
                    " AND id % 10 = 0 ORDER BY id LIMIT 1"
                )
            )
            .mappings()
            .one()
        )
    customer, order = target["arguments"]["customer_id"], target["arguments"]["order"]["id"]
    searches = [
        (f"customer (arg.customer_id, {bulk_runs.CUSTOMER_RUNS} runs)", {"arg.customer_id": str(customer)}),
        ("customer as text (quoted: none match)", {"arg.customer_id": f'"{customer}"'}),
        ("nested order id (arg.order.id, 1 run)", {"arg.order.id": str(order)}),
        ("the search box's customer_id:N", {"q": f"customer_id:{customer}"}),
        ("array holding vip (arg.tags[], 1 run in 100)", {"arg.tags[]": "vip"}),
        ("customer and status", {"arg.customer_id": str(customer), "status": "completed"}),
        ("signal payload (signal.tracking, 1 run)", {"signal.tracking": target["payload"]["tracking"]}),
        ("signal payload (signal.carrier=dhl, 1 run in 20)", {"signal.carrier": "dhl"}),
    ]
    with scratch.scratch_database(bench_url, f"pgbus_bench_tokens_{os.getpid()}") as tokens_url:
        through_api(engine, tokens_url, searches, repeat)


def seeded_searches(engine) -> list[tuple[str, dict[str, str]]]:
    """The searches inside JSON on a database `pgbus-web seed` filled (the
    demo's classes: a customer id shared by thousands of runs, a refund id
    by a few, signals with a carrier and a tracking number). The runs
    `seed --history` adds carry no customer and were created before the
    others (their ids may be higher): the refund is a recent one, by the
    class's creation order."""
    with engine.connect() as conn:
        refund = conn.execute(
            sa.text(
                "SELECT arguments FROM pgbus_workflows WHERE workflow_class = 'RefundWorkflow'"
                " AND arguments ? 'customer_id' AND arguments ? 'refund_id'"
                " ORDER BY created_at DESC OFFSET 500 LIMIT 1"
            )
        ).scalar_one()
        payload = conn.execute(
            sa.text(
                "SELECT payload FROM pgbus_workflow_signals"
                " WHERE id >= (SELECT max(id) / 2 FROM pgbus_workflow_signals)"
                " AND payload ? 'tracking' ORDER BY id LIMIT 1"
            )
        ).scalar_one()
        customer_runs = conn.execute(
            sa.text("SELECT count(*) FROM pgbus_workflows WHERE arguments @> :value"),
            {"value": json.dumps({"customer_id": refund["customer_id"]})},
        ).scalar_one()
    customer = str(refund["customer_id"])
    return [
        (f"customer (arg.customer_id, {customer_runs} runs)", {"arg.customer_id": customer}),
        ("the search box's customer_id:N", {"q": f"customer_id:{customer}"}),
        ("customer's refunds", {"arg.customer_id": customer, "workflow_class": "RefundWorkflow"}),
        ("customer and status failed", {"arg.customer_id": customer, "status": "failed"}),
        ("refund id (arg.refund_id)", {"arg.refund_id": str(refund["refund_id"])}),
        ("customer as text (quoted: none match)", {"arg.customer_id": f'"{customer}"'}),
        ("signal payload (signal.tracking, 1 run)", {"signal.tracking": payload["tracking"]}),
        (f"signal payload (signal.carrier={payload['carrier']})", {"signal.carrier": payload["carrier"]}),
    ]


def through_api(engine, tokens_url: str, searches, repeat: int) -> None:
    """Each search's plan, its SQL alone, the model's call and the API's
    answer (GET /api/v1/runs with a bearer token). The token lives in the
    scratch database *tokens_url* on the same server (looked up and its
    use written there as the API does, by core/tokens.py), so *engine*'s
    database is only read."""
    import dataclasses

    from pgbus_web.app import create_app

    token_engine = db.create_engine(tokens_url, pool_size=2, max_overflow=0)
    schema.install(token_engine)
    token, _ = tokens.add(token_engine, "bench", "viewer")
    check = tokens.checker(lambda: token_engine)

    def api_auth(request, sent):
        found = check(request, sent)
        if found is None:
            return None
        # Its use written where it lives, as the API's after-request does;
        # the app's own write (to the runs' database) then has nothing to do.
        tokens.used(token_engine, found)
        return dataclasses.replace(found, token_id=None)

    database = db.Database(engine)
    app = create_app({"database": database, "TESTING": True, "run_operations": False, "api_auth": api_auth})
    client = app.test_client()
    client.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    rows_out = []
    for label, query in searches:
        filters = run_filters.parse_query(query)

        def call(conn, filters=filters):
            return workflow_index.page(
                conn, limit=PAGE_SIZE + 1, **THRESHOLDS, **filters.page_binds(workflow_index._now())
            )

        rows, statement, parameters = capture(engine, call)
        plan = explain_text(engine, statement, parameters)
        answer = client.get("/api/v1/runs", query_string=query)
        assert answer.status_code == 200, answer.get_data(as_text=True)
        # Interleaved, one of each a round, so a busy machine's spells
        # weigh on the three alike.
        sql_times, model_times, api_times = [], [], []
        for _ in range(repeat):
            sql_times += sql_alone(engine, statement, parameters, 1)
            model_times += timed(engine, call, 1)
            started = time.perf_counter()
            answer = client.get("/api/v1/runs", query_string=query)
            api_times.append(time.perf_counter() - started)
        listed = len(answer.get_json()["runs"])
        uses = [name for name in ("pgbus_workflows_arguments", "pgbus_workflow_signals_payload") if name in plan]
        sql_ms, api_ms = statistics.median(sql_times) * 1000, statistics.median(api_times) * 1000
        model_ms = statistics.median(model_times) * 1000
        rows_out.append((label, listed, sql_ms, model_ms, api_ms, uses, min(sql_times) * 1000, min(api_times) * 1000))
        print(
            f"== {label}: {query}: {listed} runs listed; SQL {sql_ms:.2f} ms, page() {model_ms:.2f} ms, "
            f"API {api_ms:.2f} ms; index: {', '.join(uses) or 'NONE'}"
        )
        print(plan)
        print()
    # The door's own cost, the same for any filter: an API answer of no run
    # found by a primary key probe.
    empty_times = []
    for _ in range(repeat + 1):
        started = time.perf_counter()
        client.get("/api/v1/runs", query_string={"q": "no-such-run-anywhere"})
        empty_times.append(time.perf_counter() - started)
    empty_ms = statistics.median(empty_times[1:]) * 1000
    token_engine.dispose()
    print(
        "searches inside JSON (median of",
        repeat,
        "calls): SQL = the statement alone, page() = the model's"
        " call (query and rows), API = GET /api/v1/runs (request, token, query, JSON)",
    )
    print(f"  the API's own cost, an answer of no run: {empty_ms:.2f} ms")
    print(
        "  (fastest: the fastest of the calls, SQL's and the API's, and their ratio: the least disturbed by"
        " other work on the machine)"
    )
    print(
        f"  {'search':<50} {'runs':>4}  {'SQL ms':>7}  {'page()':>7}  {'API ms':>7}  page/SQL  API/SQL"
        f"  {'fastest SQL':>11}  {'API':>6}  API/SQL  index"
    )
    for label, listed, sql_ms, model_ms, api_ms, uses, sql_min, api_min in rows_out:
        print(
            f"  {label:<50} {listed:>4}  {sql_ms:7.2f}  {model_ms:7.2f}  {api_ms:7.2f}  {model_ms / sql_ms:7.1f}x"
            f"  {api_ms / sql_ms:6.1f}x  {sql_min:11.2f}  {api_min:6.2f}  {api_min / sql_min:6.1f}x"
            f"  {', '.join(uses) or '-'}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url")
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=7, help="timed calls per search (after one warm-up)")
    parser.add_argument(
        "--read-only-url",
        help="search a database `pgbus-web seed` filled instead, only reading it"
        " (every transaction read only); the API's token lives in a scratch database on its server",
    )
    args = parser.parse_args()
    if args.read_only_url:
        engine = scratch.read_only_engine(args.read_only_url)
        try:
            with scratch.scratch_database(args.read_only_url, f"pgbus_bench_tokens_{os.getpid()}") as tokens_url:
                through_api(engine, tokens_url, seeded_searches(engine), args.repeat)
        finally:
            engine.dispose()
        return

    with scratch.server(args.database_url) as url, scratch.scratch_database(url, BENCH_DATABASE) as bench_url:
        search(bench_url, args.runs, args.repeat)


if __name__ == "__main__":
    main()
