"""Two `pgbus-web serve` processes on one database: an admin sees a
person's session and API token (through either), ends both, and the next
request of each is refused by both processes; another person's session
goes on (docs/standalone.md, Sessions and the access log). Real processes
on real sockets; no wait on a clock: the refusal is of the very next
request."""

from __future__ import annotations

import http.client
import json

from support.auth_support import OPERATOR, VIEWER
from support.instances import Client, sign_in, signed_in_as

from pgbus_web.core import tokens


def api(port: int, method: str, path: str, token: str, body: dict | None = None):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = "application/json"
    try:
        connection.request(method, "/api/v1" + path, body=None if body is None else json.dumps(body), headers=headers)
        response = connection.getresponse()
        return response.status, json.loads(response.read().decode())
    finally:
        connection.close()


def test_an_admin_ends_a_session_and_a_token_and_both_processes_refuse_them_at_once(instances):
    engine, a, b = instances
    admin, _ = tokens.add(engine, "security-admin", "admin")
    bot, _ = tokens.add(engine, "otto-bot", "operator", read_only=True)
    otto, vera = Client(), Client()
    assert sign_in(otto, a, *OPERATOR) == 303 and sign_in(vera, b, *VIEWER) == 303
    assert signed_in_as(otto, a) and signed_in_as(otto, b) and signed_in_as(vera, a)
    assert api(a, "GET", "/runs", bot)[0] == 200 and api(b, "GET", "/runs", bot)[0] == 200

    # The admin sees both, through either process.
    status, found = api(b, "GET", "/sessions", admin)
    assert status == 200
    ottos = [row for row in found["sessions"] if row["name"] == OPERATOR[0]]
    assert len(ottos) == 1 and ottos[0]["provider"] == "users file" and ottos[0]["address"] == "127.0.0.1"
    assert {row["name"] for row in found["sessions"]} == {OPERATOR[0], VIEWER[0]}
    [listed] = [row for row in found["tokens"] if row["name"] == "otto-bot"]
    assert listed["scope"] == "read-only" and listed["last_used_from"] == "127.0.0.1"

    # Ended through A: refused on the next request by A and by B.
    assert api(a, "POST", f"/sessions/{ottos[0]['id']}/end", admin)[0] == 200
    assert signed_in_as(otto, b) is None and signed_in_as(otto, a) is None
    # Revoked through B: refused on the next request by both.
    assert api(b, "POST", "/tokens/otto-bot/revoke", admin)[0] == 200
    assert api(a, "GET", "/runs", bot)[0] == 401 and api(b, "GET", "/runs", bot)[0] == 401
    # Control: the other person's session and the admin's token go on.
    assert signed_in_as(vera, a) and signed_in_as(vera, b)
    assert api(a, "GET", "/runs", admin)[0] == 200

    # Every session of a person, ended through B, on both.
    again = Client()
    assert sign_in(again, a, *VIEWER) == 303 and signed_in_as(again, b)
    assert api(b, "POST", "/sessions/end-all", admin, {})[0] == 422  # nobody named: nothing ended
    assert api(b, "POST", "/sessions/end-all", admin, {"name": VIEWER[0], "all": True})[0] == 422  # unknown field
    assert signed_in_as(vera, a) and signed_in_as(again, b)
    status, ended = api(b, "POST", "/sessions/end-all", admin, {"name": VIEWER[0]})
    assert status == 200 and ended["ended"] == 2
    for client in (vera, again):
        assert signed_in_as(client, a) is None and signed_in_as(client, b) is None
