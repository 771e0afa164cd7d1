"""Schemathesis against the API as a client meets it: a waitress server on
a seeded PostgreSQL, the OpenAPI document read from GET /api/v1/openapi.json
with an operator's token, and requests generated from it, valid ones
(positive) and ones the document says are wrong (negative).

Every answer must be no 5xx, a status and a body the document names; a
request the document calls valid must not be refused for its shape
(400, 415, 422), and one it calls invalid must be. The same routes without
a token must all be 401, and a success with the token must turn into a 401
without it (Schemathesis's ignored_auth). Bounded and derandomized: the same
requests every run, about a minute on two cores, no timing asserted."""

from __future__ import annotations

import hypothesis
import pytest
import schemathesis
from hypothesis import HealthCheck
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    allow_header_conformance,
    ignored_auth,
    negative_data_rejection,
    positive_data_acceptance,
    response_schema_conformance,
    status_code_conformance,
    unsupported_method,
)
from support.action_support import completed, paused_on_capture, ready_later, waiting_for_shipment
from support.api_support import BASE, token_for
from support.auth_support import signed_in_app, write_users
from support.served import running
from waitress.server import create_server

from pgbus_web.core import lock_filters
from pgbus_web.rules import run_filters

# Requests per operation and generation mode: enough to reach every bound
# and required field, few enough for about a minute on two cores.
EXAMPLES = 12
SEED = 20260
# The refusals of a request's shape (the body's JSON, its type, a field or
# a parameter): what a valid request never gets, an invalid one always.
SHAPE_REFUSALS = ("400", "415", "422")
# The routes that answer without a token: none; the document itself is
# behind the same sign-in.
PUBLIC: frozenset[str] = frozenset()

# What a client generated from the document asks for.
JSON = "application/json"
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    response_schema_conformance,
    positive_data_acceptance,
    negative_data_rejection,
    ignored_auth,
    unsupported_method,
    allow_header_conformance,
]


def _tied(values) -> None:
    """What OpenAPI cannot say between two parameters, said by dropping:
    of the filters parse refuses together (run_filters.APART), the second;
    "to" unless "from" is before it (simply: without "from"); the Locks
    page's cursor whole or not at all."""
    if not isinstance(values, dict):
        return
    for first, second in run_filters.APART:
        if values.get(first) not in (None, "") and values.get(second) not in (None, ""):
            del values[second]
    if values.get("from") not in (None, "") and "to" in values:
        del values["to"]
    cursor = [name for name in lock_filters.CURSOR if values.get(name) not in (None, "")]
    if len(cursor) == 1:
        del values[cursor[0]]


def _anonymous_config() -> schemathesis.Config:
    # One valid request per route is enough to see it refused.
    return schemathesis.Config.from_dict(
        {
            "seed": SEED,
            "suppress-health-check": ["all"],
            "generation": {"mode": "positive", "max-examples": 1, "deterministic": True},
            "phases": {"coverage": {"enabled": False}, "stateful": {"enabled": False}},
        }
    )


def _config(*, mode: str) -> schemathesis.Config:
    return schemathesis.Config.from_dict(
        {
            "seed": SEED,
            "suppress-health-check": ["all"],
            # What a JSON client can send: UTF-8 text, and no NUL (PostgreSQL
            # text cannot hold one; the document's patterns say so of each
            # text field, not of the strings inside a payload).
            "generation": {
                "mode": mode,
                "max-examples": EXAMPLES,
                "deterministic": True,
                "codec": "utf-8",
                "allow-x00": False,
            },
            "phases": {"stateful": {"enabled": False}},
            "checks": {
                "positive_data_acceptance": {"expected-statuses": ["2xx", "401", "403", "404", "409", "413"]},
                # A caller refused whatever it sends (its token's powers) is
                # refused too; and so is a path that names nothing.
                "negative_data_rejection": {"expected-statuses": [*SHAPE_REFUSALS, "401", "403", "404", "405", "413"]},
            },
            # A confirmed operation whose filters fit no run is refused
            # (422, "fits none of the N matching runs"): what runs there
            # are, no document can say ahead.
            "operations": [
                {
                    "include-operation-id": "startOperation",
                    "checks": {
                        "positive_data_acceptance": {
                            "expected-statuses": ["2xx", "401", "403", "404", "409", "413", "422"]
                        }
                    },
                }
            ],
        }
    )


@pytest.fixture
def served(database, engine, runs, tmp_path):
    """A signed-in standalone server on a seeded database, and an
    operator's token."""
    for make in (paused_on_capture, waiting_for_shipment, ready_later, completed):
        make(runs)
    token = token_for(engine, "schemathesis", "operator")
    app = signed_in_app(database, write_users(tmp_path / "users"))
    server = create_server(app, host="127.0.0.1", port=0, threads=4)
    with running(server) as port:
        yield f"http://127.0.0.1:{port}", token


@pytest.fixture
def with_token(served):
    url, token = served
    headers = {"Authorization": f"Bearer {token}"}
    return schemathesis.openapi.from_url(f"{url}{BASE}/openapi.json", headers=headers, config=_config(mode="all"))


@pytest.fixture
def without_token(served):
    url, token = served
    # The document read with the token; every request then sent without it.
    return schemathesis.openapi.from_url(
        f"{url}{BASE}/openapi.json", headers={"Authorization": f"Bearer {token}"}, config=_anonymous_config()
    )


authenticated = schemathesis.pytest.from_fixture("with_token")
anonymous = schemathesis.pytest.from_fixture("without_token")


@authenticated.parametrize()
@hypothesis.settings(
    max_examples=EXAMPLES, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck), database=None
)
def test_what_the_document_allows_is_taken_and_what_it_forbids_refused(case, served):
    _, token = served
    if case.meta is not None and case.meta.generation.mode.is_positive:
        _tied(case.query)
        _tied((case.body or {}).get("filters") if isinstance(case.body, dict) else None)
    case.call_and_validate(headers={"Authorization": f"Bearer {token}", "Accept": JSON}, checks=CHECKS, timeout=60)


@anonymous.parametrize()
@hypothesis.settings(
    max_examples=1, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck), database=None
)
def test_every_route_refuses_a_caller_without_a_token(case):
    # As curl asks ("Accept: */*"): a 401 problem, never the sign-in form.
    response = case.call(timeout=60)
    if case.path in PUBLIC:
        return
    assert response.status_code == 401, (case.method, response.request.url, response.status_code, response.text[:100])
    assert response.headers["content-type"][0].startswith("application/problem+json")


@pytest.fixture(autouse=True)
def _node_id(request):
    """Schemathesis's pytest integration (4.32) renames each operation's
    subtest through the item's private ``_nodeid``, which pytest 9.2 no
    longer has: given back here, so that it reads and restores it."""
    if not hasattr(request.node, "_nodeid"):
        request.node._nodeid = request.node.nodeid
