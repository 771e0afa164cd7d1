"""Two `pgbus-web serve` processes and a worker on one database (the `instances`
fixture, registered by conftest.py), and an HTTP client that keeps its cookies."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
from contextlib import ExitStack, contextmanager
from urllib.parse import urlencode

import pytest
from bs4 import BeautifulSoup

from pgbus_web.plumbing import csrf
from support.auth_support import write_users
from support.waiting import wait_until

SECRET = "one key for every instance"


DEFINITIONS = "pgbus_web.demo.workflows"


# The machine may be busy: a deadline only bounds a wait for a state.
PATIENCE = 120.0


METRICS_INTERVAL = "1"


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Client:
    """A browser's part that matters here: it keeps the cookies the
    instances set, whichever instance it talks to."""

    def __init__(self) -> None:
        self.cookies: dict[str, str] = {}

    def request(
        self, port: int, method: str, path: str, form: dict | None = None, headers: dict[str, str] | None = None
    ):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        sent = {"Accept": "text/html", **(headers or {})}
        if self.cookies:
            sent["Cookie"] = "; ".join(f"{name}={value}" for name, value in self.cookies.items())
        body = None
        if form is not None:
            body = urlencode(form)
            sent["Content-Type"] = "application/x-www-form-urlencoded"
        try:
            connection.request(method, path, body=body, headers=sent)
            response = connection.getresponse()
            text = response.read().decode()
        finally:
            connection.close()
        for header in response.headers.get_all("Set-Cookie") or []:
            name, _, rest = header.partition("=")
            value = rest.split(";", 1)[0]
            if value and "max-age=0" not in header.lower():
                self.cookies[name] = value
            else:
                self.cookies.pop(name, None)
        return response.status, response.headers, text

    def get(self, port, path, **kwargs):
        return self.request(port, "GET", path, **kwargs)

    def post(self, port, path, form, **kwargs):
        return self.request(port, "POST", path, form=form, **kwargs)


def page_of(text: str) -> BeautifulSoup:
    return BeautifulSoup(text, "html.parser")


def csrf_token(text: str) -> str:
    return json.loads(page_of(text).select_one("body")["hx-headers"])[csrf.HEADER_NAME]


def sign_in(client: Client, port: int, name: str, password: str) -> int:
    status, _, text = client.get(port, "/sign-in")
    assert status == 200
    token = page_of(text).select_one("input[name=token]")["value"]
    status, _, _ = client.post(
        port, "/sign-in", {"token": token, "name": name, "password": password, "next": "/workflows"}
    )
    return status


def signed_in_as(client: Client, port: int) -> str | None:
    """Who the instance at *port* takes the client for (None: asked to sign in)."""
    status, _, text = client.get(port, "/workflows")
    if status != 200:
        return None
    return page_of(text).select_one(".pgbus-account span").get_text(" ", strip=True)


def eventually(check, what: str):
    """*check()*'s first truthy answer, waiting as long as PATIENCE allows."""
    return wait_until(check, timeout=PATIENCE, what=what, every=0.2)


@contextmanager
def process(command, env, log_path):
    with open(log_path, "w") as log:
        # A session of its own: whatever is left at the end goes with its group.
        started = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield started
    finally:
        if started.poll() is None:
            started.terminate()
            try:
                started.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(started.pid, 9)
                started.wait(timeout=10)


def up(port: int, started, log_path) -> bool:
    if started.poll() is not None:
        raise AssertionError(log_path.read_text())
    try:
        return Client().get(port, "/health")[0] == 200
    except OSError:
        return False


@pytest.fixture
def instances(engine, database_url, tmp_path):
    """(engine, port of A, port of B): two serve processes and a worker,
    one database, one secret key, one users file."""
    users_file = write_users(tmp_path / "users")
    env = {**os.environ, "PGBUS_DATABASE_URL": database_url, "PGBUS_WEB_SECRET_KEY": SECRET}
    ports = [_free_port(), _free_port()]
    with ExitStack() as stack:
        for label, port in zip("ab", ports, strict=True):
            log_path = tmp_path / f"serve-{label}.log"
            started = stack.enter_context(
                process(
                    [
                        sys.executable,
                        "-m",
                        "pgbus_web",
                        "serve",
                        "--port",
                        str(port),
                        "--users-file",
                        str(users_file),
                        "--definitions",
                        DEFINITIONS,
                        "--metrics-interval",
                        METRICS_INTERVAL,
                        "--no-access-log",
                    ],
                    env,
                    log_path,
                )
            )
            eventually(lambda p=port, s=started, log=log_path: up(p, s, log), f"serve {label} answers /health")
        stack.enter_context(
            process(
                [sys.executable, "-m", "pgbus_web", "worker", "--definitions", DEFINITIONS, "--poll-interval", "0.2"],
                env,
                tmp_path / "worker.log",
            )
        )
        yield engine, ports[0], ports[1]
