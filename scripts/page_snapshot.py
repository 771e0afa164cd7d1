"""Every page and API answer of one database, written to a folder, so that a
reshape of the code can be checked byte for byte.

    pgbus-web seed --database-url URL --runs 2000 --seed 7
    python scripts/page_snapshot.py --database-url URL --out before   # old checkout
    python scripts/page_snapshot.py --database-url URL --out after    # new checkout
    diff -r before after

The clock is frozen (time-machine: `pip install time-machine`) at one
minute after the newest run, so "3 min ago" reads the same in both; the
pages' reads take their now from Python, never from the database's clock.
Every GET route of the app without a parameter is fetched, and the run
routes for a few runs, in en, de and ja; what differs on every request
(the CSRF token, a nonce) is replaced by a placeholder. The script reads
only; its one write is the API token it makes (named page-snapshot, kept
in --token-folder for the next run).
"""

from __future__ import annotations

import argparse
import re
from datetime import timedelta
from pathlib import Path

import sqlalchemy as sa
import time_machine

from pgbus_web import db
from pgbus_web.app import create_app
from pgbus_web.core import tokens
from pgbus_web.demo.workflows import REGISTRY

ACTOR = "snapshot"
TOKEN_FILE = ".page-snapshot-token"

EXTRA = [
    "/workflows?reason=paused_error",
    "/workflows?reason=overdue",
    "/workflows?status=failed",
    "/workflows?q=order",
    "/workflows/insights/OrderWorkflow",
    "/workflows/insights/OrderWorkflow?range=7d",
    "/nope-not-a-page",
    "/api/v1/runs?reason=paused_error",
    "/api/v1/runs?unknown=1",
]
SKIPPED = ("/static/", "/metrics", "/health", "/export", "/sign-out", "/events")
RANDOM = [
    (re.compile(r'("X-CSRF-Token": ?")[^"]+'), r"\1CSRF"),
    (re.compile(r'(name="csrf_token" value=")[^"]+'), r"\1CSRF"),
    (re.compile(r"(nonce=\")[^\"]+"), r"\1NONCE"),
]


def _token(engine: sa.Engine, folder: Path) -> str:
    path = folder / TOKEN_FILE
    if path.exists():
        return path.read_text().strip()
    secret, _row = tokens.add(engine, "page-snapshot", "admin")
    path.write_text(secret)
    return secret


def _runs(engine: sa.Engine) -> list[str]:
    with engine.connect() as conn:
        return list(
            conn.execute(
                sa.text(
                    "(SELECT workflow_id FROM pgbus_workflows ORDER BY workflow_id LIMIT 4)"
                    " UNION ALL (SELECT workflow_id FROM pgbus_workflows WHERE status = 'paused'"
                    " ORDER BY workflow_id LIMIT 2)"
                )
            ).scalars()
        )


def _routes(app) -> list[str]:
    """The app's GET routes that take no parameter."""
    return sorted(
        rule.rule
        for rule in app.url_map.iter_rules()
        if "GET" in (rule.methods or ()) and not rule.arguments and not rule.rule.startswith(SKIPPED)
    )


def _frozen_at(engine: sa.Engine):
    with engine.connect() as conn:
        newest = conn.execute(sa.text("SELECT max(created_at) FROM pgbus_workflows")).scalar_one()
    return newest.replace(microsecond=0) + timedelta(minutes=1)


def _name(url: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", url.strip("/")) or "root"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--token-folder", type=Path, default=Path("."), help="where the API token is kept between runs")
    args = parser.parse_args()
    engine = db.create_engine(args.database_url)
    database = db.Database(engine)
    app = create_app(
        {
            "database": database,
            "registry": REGISTRY,
            "run_operations": False,
            "actor_name": lambda request: ACTOR,
            "SECRET_KEY": "page-snapshot",
        }
    )
    client = app.test_client()
    secret = _token(engine, args.token_folder)
    runs = _runs(engine)
    urls = _routes(app) + EXTRA + [f"/workflows/{run}" for run in runs] + [f"/api/v1/runs/{run}" for run in runs]
    urls += [f"/workflows/compare?a={runs[0]}&b={runs[1]}", f"/api/v1/runs/compare?a={runs[0]}&b={runs[1]}"]
    args.out.mkdir(parents=True, exist_ok=True)
    with time_machine.travel(_frozen_at(engine), tick=False):
        for url in urls:
            if url.startswith("/api/"):
                answer = client.get(url, headers={"Authorization": f"Bearer {secret}"})
                _write(args.out / f"api-{_name(url)}.txt", answer)
                continue
            for language in ("en", "de", "ja"):
                answer = client.get(url, headers={"Accept-Language": language})
                _write(args.out / f"page-{language}-{_name(url)}.txt", answer)
    print(f"{len(urls)} addresses written to {args.out}")


def _write(path: Path, answer) -> None:
    body = answer.get_data(as_text=True)
    for pattern, placeholder in RANDOM:
        body = pattern.sub(placeholder, body)
    path.write_text(f"{answer.status}\n{answer.headers.get('Content-Type')}\n\n{body}")


if __name__ == "__main__":
    main()
