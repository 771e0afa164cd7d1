"""The sign-in throttle (auth/throttle.py): kept in PostgreSQL, so every
process counts the same attempts; an attempt reserved before its password
is checked, so a concurrent burst checks no more passwords than the limit;
keyed by name and client address (the client's, behind a trusted proxy),
so nobody's guesses lock the right password out from an address that has
not failed. Passwords checked are counted by wrapping passwords.verify."""

from __future__ import annotations

import base64
import threading
import time

import pytest
from support.auth_support import OPERATOR, VIEWER, sign_in, write_users
from support.web_helpers import make_app, soup

from pgbus_web import db
from pgbus_web.auth import Auth, passwords
from pgbus_web.auth.throttle import PER_ADDRESS, PER_NAME_ADDRESS, Throttle

BURST = 30


@pytest.fixture
def users_file(tmp_path):
    return write_users(tmp_path / "users")


@pytest.fixture
def checked(monkeypatch):
    """The passwords verified so far (a list, one entry per verify). Each
    verify also waits a little, as a real Argon2 hash does: it widens the
    gap between an attempt's check and its count that a race needs."""
    calls = []
    lock = threading.Lock()
    verify = passwords.verify

    def counting(stored, password):
        with lock:
            calls.append(password)
        time.sleep(0.2)  # the behaviour: a verify that takes a hash's time
        return verify(stored, password)

    monkeypatch.setattr(passwords, "verify", counting)
    return calls


def proxied_app(database, users_file, **throttle):
    """The app behind one trusted proxy on loopback (the test client's
    address): the client address is the X-Forwarded-For one."""
    auth = Auth(users_file, throttle=Throttle(**throttle) if throttle else None)
    return make_app(database, auth=auth, SECRET_KEY="test secret", trusted_proxies=1)


def client_at(app, address: str):
    client = app.test_client()
    client.environ_base["HTTP_X_FORWARDED_FOR"] = address
    return client


def test_a_concurrent_burst_checks_at_most_the_limit(database_url, _installed_engine, engine, users_file, checked):
    # A pool for every thread at once: the burst waits on the throttle's
    # row lock, not on the pool.
    wide = db.create_engine(database_url, pool_size=BURST + 5)
    try:
        app = proxied_app(db.Database(wide), users_file)
        clients, tokens = [], []
        for _ in range(BURST):
            client = client_at(app, "203.0.113.9")
            page = client.get("/sign-in")
            clients.append(client)
            tokens.append(soup(page).select_one("input[name=token]")["value"])
        start = threading.Barrier(BURST)
        statuses = []

        def guess(client, token):
            start.wait(timeout=120)
            response = client.post("/sign-in", data={"token": token, "name": OPERATOR[0], "password": "wrong"})
            statuses.append(response.status_code)

        threads = [threading.Thread(target=guess, args=pair) for pair in zip(clients, tokens, strict=True)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=300)
        assert sorted(statuses) == [401] * PER_NAME_ADDRESS + [429] * (BURST - PER_NAME_ADDRESS)
        assert len(checked) == PER_NAME_ADDRESS
    finally:
        wide.dispose()


def test_a_concurrent_basic_burst_checks_at_most_the_limit(
    database_url, _installed_engine, engine, users_file, checked
):
    # HTTP Basic takes the same reservation before the hash as the form:
    # 30 scripts guessing at once get at most the limit checked.
    wide = db.create_engine(database_url, pool_size=BURST + 5)
    try:
        app = proxied_app(db.Database(wide), users_file)
        start = threading.Barrier(BURST)
        statuses = []

        def guess(number):
            client = client_at(app, "203.0.113.10")
            start.wait(timeout=120)
            credentials = base64.b64encode(f"{OPERATOR[0]}:wrong {number}".encode()).decode()
            response = client.get("/workflows", headers={"Authorization": f"Basic {credentials}"})
            statuses.append(response.status_code)

        threads = [threading.Thread(target=guess, args=(number,)) for number in range(BURST)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=300)
        # Control: every guess was answered, each a refusal.
        assert len(statuses) == BURST and all(status in (401, 429) for status in statuses), statuses
        assert len(checked) == PER_NAME_ADDRESS
    finally:
        wide.dispose()


def test_guesses_from_one_address_never_lock_the_name_out_from_another(database, users_file, checked):
    app = proxied_app(database, users_file)
    attacker = client_at(app, "203.0.113.9")
    for _ in range(PER_NAME_ADDRESS):
        assert sign_in(attacker, OPERATOR[0], "wrong").status_code == 401
    assert sign_in(attacker, *OPERATOR).status_code == 429
    before = len(checked)
    assert sign_in(client_at(app, "198.51.100.7"), *OPERATOR).status_code == 303
    assert len(checked) == before + 1


def test_a_name_under_attack_only_slows_addresses_that_tried_it(database, users_file):
    app = proxied_app(database, users_file, per_name=6)
    for address in ("203.0.113.1", "203.0.113.2", "203.0.113.3"):
        for _ in range(2):
            assert sign_in(client_at(app, address), OPERATOR[0], "wrong").status_code == 401
    # Hot now: an address that already failed gets no further attempt...
    assert sign_in(client_at(app, "203.0.113.1"), *OPERATOR).status_code == 429
    # ...one that has not still signs in with the right password.
    assert sign_in(client_at(app, "198.51.100.7"), *OPERATOR).status_code == 303


def test_one_client_behind_the_proxy_does_not_lock_out_the_others(database, users_file):
    app = proxied_app(database, users_file)
    noisy = client_at(app, "203.0.113.9")
    for number in range(PER_ADDRESS):
        assert sign_in(noisy, f"nobody{number}", "wrong").status_code == 401
    assert sign_in(noisy, *VIEWER).status_code == 429
    assert sign_in(client_at(app, "198.51.100.7"), *VIEWER).status_code == 303


def test_every_process_counts_the_same_attempts(database, users_file):
    # Two apps over one database, as two instances behind one address.
    first, second = proxied_app(database, users_file), proxied_app(database, users_file)
    for number in range(PER_NAME_ADDRESS):
        app = first if number % 2 else second
        assert sign_in(client_at(app, "203.0.113.9"), OPERATOR[0], "wrong").status_code == 401
    for app in (first, second):
        assert sign_in(client_at(app, "203.0.113.9"), *OPERATOR).status_code == 429


def test_a_success_gives_its_attempt_back(database, users_file):
    app = proxied_app(database, users_file)
    client = client_at(app, "203.0.113.9")
    for _ in range(PER_NAME_ADDRESS - 1):
        assert sign_in(client, OPERATOR[0], "wrong").status_code == 401
    assert sign_in(client_at(app, "203.0.113.9"), *OPERATOR).status_code == 303
    # The pair's failures went with the success: a full count again.
    for _ in range(PER_NAME_ADDRESS):
        assert sign_in(client_at(app, "203.0.113.9"), OPERATOR[0], "wrong").status_code == 401
    assert sign_in(client_at(app, "203.0.113.9"), *OPERATOR).status_code == 429
