"""The Locks page and its actions through the Flask test client, on real
PostgreSQL with real PGMQ queues; HTML checked with selectors."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from support.lock_support import FLOOR, QUEUE
from support.web_helpers import make_app, soup, text_of

from pgbus_web.locks import FRESH, GONE, LIVE, ORPHAN, PARKED, STATES

OLD = FLOOR + timedelta(minutes=5)


@pytest.fixture
def app(database):
    return make_app(database)


@pytest.fixture
def client(app):
    return app.test_client()


def _rows(response) -> dict[str, object]:
    return {row["data-lock-key"]: row for row in soup(response).select("#pgbus-locks tr.pgbus-lock")}


def _post(client, path, data=None, *, page="/locks", **kwargs):
    """Post as the page's forms do: with the CSRF token the page carries, if any."""
    data = dict(data or {})
    token = soup(client.get(page)).select_one("#pgbus-locks input[name=csrf_token]")
    if token is not None:
        data["csrf_token"] = token["value"]
    return client.post(path, data=data, **kwargs)


def _every_state(locks) -> None:
    locks.live("a-live")
    locks.read()
    locks.gone("b-gone")
    locks.parked("c-parked", age=OLD, concurrency_key="Sync/tenant-3", double_encoded=True)
    locks.acquire("d-fresh")
    locks.acquire("e-orphan", age=OLD)


# -- the page ---------------------------------------------------------------


def test_empty_page(client):
    response = client.get("/locks")
    assert response.status_code == 200
    page = soup(response)
    assert text_of(page.select_one("h1")) == "Locks"
    assert text_of(page.select_one("#pgbus-locks .pgbus-empty")) == "No uniqueness locks are held."


def test_nav_links_to_the_locks_page(client):
    page = soup(client.get("/workflows"))
    assert [text_of(a) for a in page.select(".pgbus-nav a[href$='/locks']")] == ["Locks"]


# The wall clock names the day too when the moment is on another one (an
# orphan due after midnight): the date is optional in these patterns.
@pytest.mark.parametrize(
    "key, state, detail",
    [
        (
            "a-live",
            LIVE,
            re.compile(
                r"^Message enqueued (just now|.+ ago) \((?:[A-Z][a-z]{2} \d{1,2}, )?\S+\s?[AP]M\) ?, read 1 time$"
            ),
        ),
        ("b-gone", GONE, re.compile(r"^Message #\d+ is no longer in its queue$")),
        ("c-parked", PARKED, re.compile(r"^Its job is parked behind concurrency key Sync/tenant-3$")),
        (
            "d-fresh",
            FRESH,
            re.compile(
                r"^Unbound; an orphan in \d+ minutes \((?:[A-Z][a-z]{2} \d{1,2}, )?\S+\s?[AP]M\) if nothing binds it$"
            ),
        ),
        ("e-orphan", ORPHAN, re.compile(r"^Unbound past the age floor, and no parked job carries it$")),
    ],
)
def test_each_state_has_its_badge_and_sentence(client, locks, key, state, detail):
    _every_state(locks)
    row = _rows(client.get("/locks"))[key]
    assert row["data-state"] == state
    assert row.select_one(".pgbus-badge")["data-status"] == state
    assert detail.match(text_of(row.select_one(".pgbus-lock-detail")))


def test_parked_concurrency_key_and_lock_key_render_as_code(client, locks):
    _every_state(locks)
    row = _rows(client.get("/locks"))["c-parked"]
    assert text_of(row.select_one("th code")) == "c-parked"
    assert text_of(row.select_one(".pgbus-lock-detail code")) == "Sync/tenant-3"


def test_live_row_shows_its_queue_and_message(client, locks):
    message = locks.live("k")
    row = _rows(client.get("/locks"))["k"]
    assert text_of(row.select_one(".pgbus-lock-queue")) == QUEUE
    assert text_of(row.select_one(".pgbus-lock-message")) == f"#{message['msg_id']}"
    assert row.select_one("time[datetime]") is not None


def test_gone_row_says_when_its_queue_does_not_exist(client, locks, engine):
    import sqlalchemy as sa

    with engine.begin() as conn:
        conn.execute(
            sa.text("INSERT INTO pgbus_uniqueness_keys (lock_key, queue_name, msg_id) VALUES ('k', 'retired', 4)")
        )
    row = _rows(client.get("/locks"))["k"]
    assert text_of(row.select_one(".pgbus-lock-detail")) == "There is no queue named retired"


def test_counts_per_state_link_to_their_filter(client, locks):
    _every_state(locks)
    page = soup(client.get("/locks"))
    chips = {a["data-state"]: a for a in page.select(".pgbus-lock-counts a")}
    assert {state: text_of(chip.strong) for state, chip in chips.items()} == {state: "1" for state in STATES}
    assert chips[ORPHAN]["href"].endswith("/locks?state=orphan")
    assert text_of(page.select_one("#pgbus-locks-title")) == "5 locks"


@pytest.mark.parametrize("state", STATES)
def test_state_filter(client, locks, state):
    _every_state(locks)
    response = client.get(f"/locks?state={state}")
    assert {row["data-state"] for row in _rows(response).values()} == {state}
    assert soup(response).select_one(f"#pgbus-locks-state option[value={state}]").has_attr("selected")


def test_queue_filter_lists_and_counts_one_queue(client, locks):
    _every_state(locks)
    locks.live("m-live", "pgbus_mailers")
    response = client.get("/locks?queue=pgbus_mailers")
    assert list(_rows(response)) == ["m-live"]
    chips = {a["data-state"]: text_of(a.strong) for a in soup(response).select(".pgbus-lock-counts a")}
    assert chips == {LIVE: "1", GONE: "0", PARKED: "0", FRESH: "0", ORPHAN: "0"}


def test_a_filter_that_matches_nothing_says_so(client, locks):
    locks.acquire("k")
    page = soup(client.get("/locks?state=orphan"))
    assert text_of(page.select_one("#pgbus-locks .pgbus-empty")) == "No locks match these filters."


@pytest.mark.parametrize(
    "query, words",
    [
        ("state=stale", "state"),
        ("after_key=k", "after_at"),
        ("after_at=yesterday&after_key=k", "after_at"),
    ],
)
def test_bad_filters_are_reported_with_400(client, locks, query, words):
    locks.acquire("k")
    response = client.get(f"/locks?{query}")
    assert response.status_code == 400
    assert words in text_of(soup(response).select_one("#pgbus-locks .pgbus-notice-error"))


def test_pages_follow_the_keyset_cursor(database, locks):
    client = make_app(database, page_size=2).test_client()
    for index in range(5):
        locks.acquire(f"k{index}", age=timedelta(minutes=50 - index))
    pages, url = [], "/locks"
    while url:
        page = soup(client.get(url))
        pages.append([row["data-lock-key"] for row in page.select("tr.pgbus-lock")])
        next_link = page.select_one("a[rel=next]")
        url = next_link["href"] if next_link else None
        # Every page but the first links back to the first.
        assert (page.select_one("a[rel=first]") is None) == (len(pages) == 1)
    assert pages == [["k0", "k1"], ["k2", "k3"], ["k4"]]


def test_htmx_request_gets_only_the_locks_block(client, locks):
    locks.acquire("k")
    response = client.get("/locks", headers={"HX-Request": "true", "HX-Target": "pgbus-locks"})
    page = soup(response)
    assert page.select_one("html") is None
    assert page.select_one("section#pgbus-locks") is not None
    assert "HX-Request" in response.headers["Vary"]


def test_no_raw_message_keys_on_the_page(client, locks):
    _every_state(locks)
    html = client.get("/locks").get_data(as_text=True)
    visible = " ".join(soup(client.get("/locks")).get_text(" ").split())
    assert "pgbus." not in visible.replace("pgbus:", "")
    assert html.count("data-lock-key=") == 5


# -- actions ------------------------------------------------------------------


def test_release_redirects_back_to_the_view_with_a_message(client, locks):
    locks.acquire("k", age=OLD)
    response = _post(client, "/locks/release?state=orphan", {"lock_key": "k"})
    assert response.status_code == 303
    assert response.headers["Location"].endswith("/locks?state=orphan")
    assert locks.row("k") is None
    page = soup(client.get(response.headers["Location"]))
    assert text_of(page.select_one(".pgbus-messages .pgbus-notice-ok")) == "Released lock k."


def test_release_of_an_unknown_key_is_404_and_changes_nothing(client, locks):
    locks.acquire("k", age=OLD)
    before = locks.snapshot()
    response = _post(client, "/locks/release", {"lock_key": "nope"})
    assert response.status_code == 404
    notice = soup(response).select_one("#pgbus-messages .pgbus-notice-error")
    assert text_of(notice) == "There is no lock with key nope: it was released already."
    assert locks.snapshot() == before


def test_release_without_a_key_is_400(client, locks):
    locks.acquire("k", age=OLD)
    before = locks.snapshot()
    response = _post(client, "/locks/release", {})
    assert response.status_code == 400
    assert "lock_key" in text_of(soup(response).select_one(".pgbus-notice-error"))
    assert locks.snapshot() == before


def test_discard_deletes_the_message_and_releases_the_lock(client, locks):
    message = locks.live("k")
    response = _post(client, "/locks/discard", {"lock_key": "k", "queue_name": QUEUE, "msg_id": message["msg_id"]})
    assert response.status_code == 303
    assert locks.row("k") is None and locks.message(QUEUE, message["msg_id"]) is None


@pytest.mark.parametrize(
    "form, status",
    [
        ({"lock_key": "k", "queue_name": QUEUE, "msg_id": "12abc"}, 400),
        ({"lock_key": "k", "queue_name": QUEUE, "msg_id": "-1"}, 400),
        ({"lock_key": "k", "queue_name": QUEUE, "msg_id": "99999999999999999999"}, 400),
        ({"lock_key": "k", "queue_name": QUEUE}, 400),
        ({"lock_key": "k", "queue_name": "no_such_queue", "msg_id": "1"}, 404),
        ({"lock_key": "nope", "queue_name": QUEUE, "msg_id": "1"}, 404),
        ({"lock_key": "k", "queue_name": QUEUE, "msg_id": "424242"}, 409),
    ],
)
def test_discard_with_bad_input_changes_nothing(client, locks, form, status):
    locks.live("k")
    before = locks.snapshot()
    response = _post(client, "/locks/discard", form)
    assert response.status_code == status
    assert soup(response).select_one("#pgbus-messages .pgbus-notice-error") is not None
    assert locks.snapshot() == before


def test_reap_releases_orphans_and_spares_the_rest(client, locks):
    _every_state(locks)
    locks.gone("f-gone-old", age=OLD)
    response = _post(client, "/locks/reap", {})
    assert response.status_code == 303
    assert locks.states() == {"a-live": LIVE, "b-gone": GONE, "c-parked": PARKED, "d-fresh": FRESH}
    page = soup(client.get(response.headers["Location"]))
    assert text_of(page.select_one(".pgbus-messages .pgbus-notice-ok")) == "Released 2 orphaned locks."


def test_htmx_action_answers_with_the_block_and_its_message(client, locks):
    locks.acquire("k", age=OLD)
    locks.acquire("other", age=OLD)
    response = _post(
        client,
        "/locks/release?state=orphan",
        {"lock_key": "k"},
        headers={"HX-Request": "true", "HX-Target": "pgbus-locks"},
    )
    assert response.status_code == 200
    page = soup(response)
    assert page.select_one("html") is None
    assert text_of(page.select_one("#pgbus-messages .pgbus-notice-ok")) == "Released lock k."
    assert list(_rows(response)) == ["other"]


def test_htmx_action_refused_still_answers_with_the_block(client, locks):
    locks.acquire("k", age=OLD)
    before = locks.snapshot()
    response = _post(
        client, "/locks/release", {"lock_key": "nope"}, headers={"HX-Request": "true", "HX-Target": "pgbus-locks"}
    )
    # A refusal keeps its status and carries the pages' one mark of a refusal to show.
    assert response.status_code == 404
    assert response.headers["X-Pgbus-Refusal"] == "1"
    assert soup(response).select_one("#pgbus-messages .pgbus-notice-error")["data-category"] == "error"
    assert locks.snapshot() == before


def test_forms_confirm_before_they_post(client, locks):
    locks.live("k")
    row = _rows(client.get("/locks"))["k"]
    forms = row.select("details.pgbus-confirm > form[method=post]")
    assert [form["action"].rsplit("/", 1)[1] for form in forms] == ["discard", "release"]
    sentences = [text_of(form.select_one("p")) for form in forms]
    assert sentences[0] == f"Delete message #1 from {QUEUE} and release the lock it holds? Its job will not run."
    assert sentences[1].startswith("Release lock k? Its job may still run")


# -- who may act -------------------------------------------------------------


@pytest.fixture
def viewer(database):
    return make_app(database, can_act=lambda request: False).test_client()


def test_viewers_see_no_buttons(viewer, locks):
    _every_state(locks)
    page = soup(viewer.get("/locks"))
    assert page.select("#pgbus-locks form[method=post]") == []
    assert len(page.select("tr.pgbus-lock")) == 5


@pytest.mark.parametrize("path", ["/locks/release", "/locks/discard", "/locks/reap"])
def test_viewers_get_403_and_nothing_changes(viewer, locks, path):
    message = locks.live("k")
    locks.acquire("o", age=OLD)
    before = locks.snapshot()
    response = _post(viewer, path, {"lock_key": "o", "queue_name": QUEUE, "msg_id": message["msg_id"]})
    assert response.status_code == 403
    assert locks.snapshot() == before


def test_actions_refuse_get(client):
    assert client.get("/locks/reap").status_code == 405


@pytest.mark.parametrize("path", ["/locks/release", "/locks/discard", "/locks/reap"])
def test_a_post_without_the_csrf_token_is_refused_and_changes_nothing(client, locks, path):
    message = locks.live("k")
    locks.acquire("o", age=OLD)
    client.get("/locks")  # the browser has its cookie, not the token
    before = locks.snapshot()
    response = client.post(path, data={"lock_key": "o", "queue_name": QUEUE, "msg_id": message["msg_id"]})
    assert response.status_code == 400
    assert locks.snapshot() == before


def test_every_action_form_carries_the_csrf_token(client, locks):
    _every_state(locks)
    forms = soup(client.get("/locks")).select("#pgbus-locks form[method=post]")
    assert forms and all(form.select_one("input[name=csrf_token]")["value"] for form in forms)


def test_a_plain_refusal_carries_no_htmx_mark(client, locks):
    # Control for the mark above: a plain form post's refusal is a whole
    # page the browser shows as it is, so nothing marks it for htmx.
    before = locks.snapshot()
    response = _post(client, "/locks/release", {"lock_key": "nope"})
    assert response.status_code == 404
    assert "X-Pgbus-Refusal" not in response.headers
    assert locks.snapshot() == before
