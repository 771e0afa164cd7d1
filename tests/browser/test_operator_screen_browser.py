"""The operator's screen as a person sees it, in Chromium at 1280x800 and
390x844: the insights tables scroll inside their boxes and overlap
nothing; a verb has one word from the index's "Act on all" menu to the
dialog, the run page and the audit trail; a stacked table's labels wrap
inside their column; a long search neither widens the page nor is cut
silently, and a too-short id fragment says why nothing matched; a
filtered list's heading gives the filter's count; and the needs-attention
groups start on the first screen, before the counts.

Skipped only when /usr/bin/chromium is missing (CI installs it)."""

from __future__ import annotations

import pytest
from support.action_support import ago, paused_on_capture
from support.browser import WAIT_MS, requires_chromium, serve
from support.page_layout import (
    admin_app,
    pages,  # noqa: F401 (fixtures)
)
from support.web_helpers import step as step_

from pgbus_web.demo.workflows import REGISTRY
from pgbus_web.runtime import operation_policy, operation_record, operation_runner

pytestmark = requires_chromium


@pytest.fixture
def app(database):
    return admin_app(database)


@pytest.fixture
def server(app):
    yield from serve(app)


SIZES = [(1280, 800), (390, 844)]
size_ids = lambda size: f"{size[0]}x{size[1]}"  # noqa: E731


def opened(chromium, size, locale="en"):
    width, height = size
    context = chromium.new_context(
        viewport={"width": width, "height": height}, timezone_id="Europe/Oslo", locale=locale
    )
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    return context, page


def visit(page, url):
    page.goto(url)
    page.wait_for_load_state("load")


# Each table frame whose table reaches past the frame's own box (below or
# beside it) while the frame does not scroll: what it shows overlaps what
# follows it.
SPILLING_FRAMES = """() => {
  const spilling = [];
  for (const frame of document.querySelectorAll('.pgbus-table-wrap')) {
    const table = frame.querySelector('table');
    if (!table) continue;
    const box = frame.getBoundingClientRect(), inner = table.getBoundingClientRect();
    const style = getComputedStyle(frame);
    const below = inner.bottom > box.bottom + 1 && !['auto', 'scroll'].includes(style.overflowY);
    const beside = inner.right > box.right + 1 && !['auto', 'scroll'].includes(style.overflowX);
    if (below || beside) spilling.push(frame.className + ' ' + Math.round(inner.height) + '>' + Math.round(box.height));
  }
  return spilling;
}"""


@pytest.mark.parametrize("size", SIZES, ids=size_ids)
def test_the_insights_tables_scroll_inside_their_boxes(chromium, app, server, runs, engine, size):
    paths = pages(app, runs, engine)
    context, page = opened(chromium, size)
    problems = {}
    try:
        for locale in ("en", "ja"):
            visit(page, f"{server}{paths['insights']}?locale={locale}")
            # The hourly table has 24 rows: taller than its box at any width.
            hours = page.locator('.pgbus-activity-range[data-bucket="hour"] .pgbus-table-wrap')
            assert hours.evaluate("(el) => el.querySelector('table').offsetHeight > el.clientHeight")
            spilling = page.evaluate(SPILLING_FRAMES)
            if spilling:
                problems[f"{locale}: spills"] = spilling
            # The next day's table starts below the hourly one's box.
            hour_box = hours.bounding_box()
            day_top = page.locator('.pgbus-activity-range[data-bucket="day"]').bounding_box()["y"]
            if hour_box["y"] + hour_box["height"] > day_top + 1:
                problems[f"{locale}: hours over days"] = (hour_box, day_top)
    finally:
        context.close()
    assert problems == {}, problems


def test_a_verb_has_one_word_from_the_menu_to_the_audit_trail(chromium, app, server, runs, engine):
    from pgbus_web.core import page_reads
    from pgbus_web.core.words.verb_words import WORDS
    from pgbus_web.i18n import force_locale, t

    paused = [paused_on_capture(runs, paused_at=ago(minutes=5 + index)) for index in range(3)]
    # Runs paused on an error, resumed by an operation on their filter:
    # the step that failed is tried again.
    operation_policy.create(
        engine,
        operation_record.filters_of({"filters": {"reason": "paused_error"}}),
        "resume",
        None,
        reason="gateway back",
        actor="dashboard:alice",
        expected=None,
        registry=REGISTRY,
        thresholds=page_reads.thresholds(app.extensions["pgbus_web"].database.primary),
    )
    runner = operation_runner.Runner(engine, REGISTRY)
    while runner.step() is not None:
        pass
    still_paused = paused_on_capture(runs, paused_at=ago(minutes=1))
    context, page = opened(chromium, (1280, 800))
    said = {}
    try:
        for locale in ("en", "de", "ja"):
            with force_locale(locale):
                word, resume = t(WORDS["retry"].label), t(WORDS["resume"].label)
                event, resumed = t(WORDS["retry"].event), t(WORDS["resume"].event)
            visit(page, f"{server}/workflows?reason=paused_error&locale={locale}")
            menu = page.locator('#pgbus-operation-verb option[value="resume"]').inner_text().strip()
            page.locator("#pgbus-operation-verb").select_option("resume")
            page.locator("form.pgbus-operation-entry button[type=submit]").click()
            title = page.locator("dialog#pgbus-operation-dialog[open] h2").inner_text()
            visit(page, f"{server}/workflows/{still_paused}?locale={locale}")
            button = page.locator('details.pgbus-action[data-verb="resume"] summary').inner_text()
            visit(page, f"{server}/workflows/{paused[0]}?locale={locale}")
            audit = page.locator("#pgbus-run-audit ol.pgbus-audit").inner_text()
            said[locale] = {
                "menu": menu == word,
                "dialog": word in title and resume not in title,
                "run page": word.casefold() in button.casefold(),
                "audit trail": event in audit and resumed not in audit,
            }
    finally:
        context.close()
    assert said == {
        locale: dict.fromkeys(("menu", "dialog", "run page", "audit trail"), True) for locale in ("en", "de", "ja")
    }, said


# Each stacked cell's label (its ::before, a column 7rem wide) set in a
# probe with the label's own style: a label wider than its column runs
# over the value beside it.
LABELS_OVER_VALUES = """() => {
  const over = [];
  for (const cell of document.querySelectorAll('.pgbus-stack td[data-label], .pgbus-stack tbody th[data-label]')) {
    const label = getComputedStyle(cell, '::before');
    if (!cell.getClientRects().length || label.content === 'none' || label.float !== 'left') continue;
    const probe = document.createElement('div');
    for (const name of ['fontFamily', 'fontSize', 'fontWeight', 'fontStyle', 'textTransform', 'letterSpacing',
                        'whiteSpace', 'overflowWrap', 'wordBreak', 'hyphens', 'lineHeight', 'width']) {
      probe.style[name] = label[name];
    }
    probe.style.position = 'absolute';
    probe.textContent = cell.dataset.label;
    cell.appendChild(probe);
    if (probe.scrollWidth > probe.clientWidth + 1) over.push(cell.dataset.label
      + ' ' + probe.scrollWidth + '>' + probe.clientWidth);
    probe.remove();
  }
  return [...new Set(over)];
}"""


def test_stacked_labels_wrap_inside_their_column_on_a_phone(chromium, app, server, runs, engine):
    paths = pages(app, runs, engine)
    context, page = opened(chromium, (390, 844))
    over = {}
    try:
        for locale in ("de", "fr", "pt", "fi", "ja"):
            for name in ("workers", "operations", "insights", "index", "locks"):
                visit(page, f"{server}{paths[name]}?locale={locale}")
                found = page.evaluate(LABELS_OVER_VALUES)
                if found:
                    over[f"{locale} {name}"] = found
    finally:
        context.close()
    assert over == {}, over


CHIP_CLOSE_INSIDE = """() => { const r =
  document.querySelector('.pgbus-chip[data-filter="q"] a').getBoundingClientRect();
  return r.left >= 0 && r.right <= innerWidth && r.width > 0; }"""


@pytest.mark.parametrize("size", SIZES, ids=size_ids)
def test_a_long_search_keeps_the_page_and_its_chip_on_screen(chromium, server, runs, size):
    runs.make("completed")
    search = "x" * 200
    context, page = opened(chromium, size)
    try:
        visit(page, f"{server}/workflows?q={search}")
        widths = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        assert widths[0] <= widths[1], widths
        assert page.evaluate(CHIP_CLOSE_INSIDE)
        shown = page.locator('.pgbus-chip[data-filter="q"] [data-pgbus-clamp]')
        # Cut with an ellipsis, the whole search in its title.
        assert shown.evaluate("(el) => getComputedStyle(el).textOverflow") == "ellipsis"
        assert search in shown.get_attribute("title")
    finally:
        context.close()


def test_a_pasted_search_too_long_is_refused_in_words(chromium, server, runs):
    from pgbus_web.i18n import tn
    from pgbus_web.rules.run_filters import MAX_TEXT

    runs.make("completed")
    context, page = opened(chromium, (1280, 800))
    try:
        visit(page, f"{server}/workflows")
        page.locator("#pgbus-search-q").fill("y" * 2000)
        page.locator("#pgbus-search-q").press("Enter")
        page.wait_for_load_state("load")
        notice = page.locator(".pgbus-filter-error")
        refusal = tn("pgbus.workflows.search.too_long", 2000, limit=MAX_TEXT)
        assert notice.inner_text().strip() == refusal
        # The box keeps the text, to be mended, the refusal beside it.
        box = page.locator("#pgbus-search-q")
        assert box.input_value() == "y" * 2000
        assert box.get_attribute("aria-invalid") == "true"
        assert page.locator("#pgbus-search-error").inner_text().strip() == refusal
        box.evaluate(f"(el) => {{ el.focus(); el.setSelectionRange({MAX_TEXT}, el.value.length); }}")
        box.press("Backspace")
        box.press("Enter")
        page.wait_for_load_state("load")
        assert page.locator(".pgbus-filter-error").count() == 0
        assert page.locator("#pgbus-search-q").input_value() == "y" * MAX_TEXT
    finally:
        context.close()


def test_a_too_short_id_fragment_says_how_long_one_must_be(chromium, server, runs):
    from pgbus_web.i18n import t
    from pgbus_web.models.workflow_search import SEARCH_ID_FRAGMENT_MIN, SEARCH_ID_PREFIX_MIN

    made = runs.make("completed")
    context, page = opened(chromium, (390, 844))
    try:
        visit(page, f"{server}/workflows?q={made[10:15]}")
        said = page.locator("#pgbus-runs").inner_text()
        assert t("pgbus.workflows.search.too_short", min=SEARCH_ID_FRAGMENT_MIN, prefix=SEARCH_ID_PREFIX_MIN) in said
        # A longer search that matches nothing says only that.
        visit(page, f"{server}/workflows?q=nothing-like-this")
        assert "6" not in page.locator("#pgbus-runs .pgbus-empty").inner_text()
    finally:
        context.close()


def test_a_filtered_list_says_its_count_in_the_heading(chromium, app, server, runs, engine):
    from playwright.sync_api import expect

    from pgbus_web.i18n import force_locale, tn

    pages(app, runs, engine)
    for index in range(3):
        paused_on_capture(runs, paused_at=ago(minutes=5 + index))
    context, page = opened(chromium, (1280, 800))
    try:
        visit(page, f"{server}/workflows")
        everything = page.locator("#pgbus-total").inner_text()
        total = int("".join(ch for ch in everything if ch.isdigit()))
        with force_locale("en"):
            assert everything == tn("pgbus.workflows.index.total_runs", total)
            paused_error = tn("pgbus.workflows.index.total_matching", 4, total=str(total))
            manual = tn("pgbus.workflows.index.total_matching", 1, total=str(total))
        visit(page, f"{server}/workflows?reason=paused_error")
        assert page.locator("#pgbus-total").inner_text() == paused_error
        # The filter form's answer (htmx, the runs swapped in place) brings the heading along.
        page.locator("#pgbus-filter-reason").select_option("paused_manual")
        page.locator("form.pgbus-filters button[type=submit]").first.click()
        expect(page.locator("#pgbus-total")).to_have_text(manual, timeout=WAIT_MS)
        # Japanese says it in its own words, with the same numbers.
        visit(page, f"{server}/workflows?reason=paused_error&locale=ja")
        with force_locale("ja"):
            assert page.locator("#pgbus-total").inner_text() == tn(
                "pgbus.workflows.index.total_matching", 4, total=str(total)
            )
    finally:
        context.close()


@pytest.mark.parametrize("size", SIZES, ids=size_ids)
def test_the_groups_that_need_attention_start_on_the_first_screen(chromium, app, server, runs, engine, size):
    # Every state, a gone worker's banner above the groups, and the counts
    # of three classes: a busy first screen.
    pages(app, runs, engine)
    context, page = opened(chromium, size)
    late = {}
    try:
        for locale in ("en", "de", "ja"):
            visit(page, f"{server}/workflows?locale={locale}")
            group = page.locator("tr.pgbus-attention-group").first.bounding_box()
            counts = page.locator("#pgbus-counts").bounding_box()
            if not (group["y"] + 24 <= size[1] and group["y"] < counts["y"]):
                late[locale] = (round(group["y"]), round(counts["y"]))
    finally:
        context.close()
    assert late == {}, late


ALL_LOCALES = ("da", "de", "es", "fi", "fr", "it", "ja", "nb", "nl", "pt", "sv")


def test_the_backtrace_is_named_in_every_language(chromium, server, runs):
    from support.web_helpers import step

    from pgbus_web.i18n import force_locale, t

    with force_locale("en"):
        english = t("pgbus.workflows.show.backtrace")
    failed = runs.make(
        "paused",
        step(
            "capture_payment",
            "failed",
            error_class="TimeoutError",
            error_backtrace='File "shop.py", line 3, in capture\n  raise TimeoutError',
        ),
        paused_at=ago(minutes=1),
    )
    context, page = opened(chromium, (1280, 800))
    english_in = []
    try:
        for locale in ALL_LOCALES:
            visit(page, f"{server}/workflows/{failed}?locale={locale}")
            if page.locator("details.pgbus-backtrace summary").first.inner_text().strip() == english:
                english_in.append(locale)
    finally:
        context.close()
    assert english_in == []


def test_the_audit_trail_names_its_details_in_the_operators_language(chromium, server, runs):
    from support.web_helpers import step

    from pgbus_web.core.words.detail_keys import detail_label
    from pgbus_web.i18n import force_locale

    shown = {"attempts": 3, "error_class": "TimeoutError", "operation_id": 12}
    paused = runs.make(
        "paused",
        step("capture_payment", "failed", error_class="TimeoutError"),
        paused_at=ago(minutes=1),
        events_=[
            {"event": "paused", "actor": "system", "details": shown},
            {"event": "resumed", "actor": "dashboard:alice", "details": {"odd_key": 1}},
        ],
    )
    context, page = opened(chromium, (390, 844))
    said = {}
    try:
        for locale in ("en", "de", "ja"):
            visit(page, f"{server}/workflows/{paused}?locale={locale}")
            terms = page.locator("#pgbus-run-audit dl.pgbus-audit-details dt")
            said[locale] = {
                terms.nth(i).get_attribute("data-key"): terms.nth(i).inner_text().strip() for i in range(terms.count())
            }
            with force_locale(locale):
                expected = {key: detail_label(key) for key in shown}
            assert all(expected[key] != key for key in shown), expected
            # A key this version does not know is shown as stored.
            said[locale] = (said[locale] == {**expected, "odd_key": "odd_key"}, said[locale])
    finally:
        context.close()
    assert all(ok for ok, _ in said.values()), said


EVERY_LOCALE = ("en",) + ALL_LOCALES
LOCK_FORM = """() => {
  const box = (sel) => document.querySelector(sel).getBoundingClientRect();
  const apply = box('#pgbus-locks form.pgbus-filters button[type=submit]');
  const clear = box('#pgbus-locks form.pgbus-filters .pgbus-form-actions a');
  const select = box('#pgbus-locks-queue');
  return {oneLine: Math.abs(apply.top - clear.top) < 1, besideFields: Math.abs(apply.bottom - select.bottom) < 2,
          belowFields: apply.top >= select.bottom};
}"""


@pytest.mark.parametrize("size", SIZES, ids=size_ids)
def test_the_locks_filter_buttons_sit_on_one_line_beside_the_fields(chromium, server, locks, size):
    locks.queue()
    context, page = opened(chromium, size)
    off = {}
    try:
        for locale in EVERY_LOCALE:
            visit(page, f"{server}/locks?locale={locale}")
            placed = page.evaluate(LOCK_FORM)
            # Apply and Clear on one line, level with the fields' bottom on a
            # desktop, below them on a phone.
            if not (placed["oneLine"] and (placed["besideFields"] if size[0] > 600 else placed["belowFields"])):
                off[locale] = placed
    finally:
        context.close()
    assert off == {}, off


def test_a_time_too_far_ahead_is_bounded_and_refused_in_the_operators_words(chromium, server, runs):
    paused = runs.make(
        "paused", step_("send_receipt", "scheduled", scheduled_at=ago(hours=1)), paused_at=ago(minutes=30)
    )
    context, page = opened(chromium, (1280, 800), locale="de-DE")
    try:
        visit(page, f"{server}/workflows/{paused}?locale=de")
        page.locator('details.pgbus-action[data-verb="resume_at"] summary').click()
        field = page.locator("#pgbus-action-resume_at-at")
        # The field offers no time past the furthest one the server takes.
        latest = field.get_attribute("max")
        assert latest and latest[:4].isdigit() and latest > field.get_attribute("min")
        # Sent past it all the same (a script, an old page): refused with
        # the time as the page writes times, not as the field sent it.
        field.evaluate("(el) => { el.removeAttribute('max'); el.value = '2100-01-01T10:00'; }")
        page.locator('form[data-verb="resume_at"] button[type=submit]').click()
        error = page.locator("#pgbus-action-resume_at-at-error")
        error.wait_for()
        said = error.inner_text()
        assert "2100-01-01T10:00" not in said and "2100" in said, said
    finally:
        context.close()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_audit_trails_link_to_an_operation_is_not_told_by_colour_alone(chromium, server, runs, scheme):
    from support.browser import axe_violations

    paused = runs.make(
        "paused",
        step_("capture_payment", "failed", error_class="TimeoutError"),
        paused_at=ago(minutes=1),
        events_=[
            {"event": "paused", "actor": "dashboard:alice", "reason": "gateway down", "details": {"operation_id": 12}}
        ],
    )
    context = chromium.new_context(viewport={"width": 1280, "height": 800}, color_scheme=scheme)
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    try:
        visit(page, f"{server}/workflows/{paused}")
        assert page.locator("#pgbus-run-audit a.pgbus-event-operation").count() == 1
        found = [line for line in axe_violations(page) if line.startswith("link-in-text-block")]
    finally:
        context.close()
    assert found == []


def test_the_definitions_option_is_never_split_at_its_dashes(chromium, database, runs):
    from support.action_support import operator_app

    for index in range(2):
        paused_on_capture(runs, paused_at=ago(minutes=5 + index))
    server = serve(operator_app(database, registry=None))
    base = next(server)
    context, page = opened(chromium, (390, 844))
    split = {}
    try:
        for locale in EVERY_LOCALE:
            visit(page, f"{base}/workflows?locale={locale}")
            lines = page.evaluate("""() => [...document.querySelectorAll('.pgbus-definitions-missing code')]
                .map(el => [el.textContent, el.getClientRects().length])""")
            if sorted(text for text, _ in lines) != ["--definitions", "PGBUS_WEB_DEFINITIONS"] or any(
                count != 1 for _, count in lines
            ):
                split[locale] = lines
    finally:
        context.close()
        server.close()
    assert split == {}, split


def test_japanese_writes_its_parentheses_full_width_on_the_compare_page(chromium, server, runs):
    # The failed refund beside a completed one: an outcome with its error
    # in parentheses, the same definition's sentence, and an argument
    # whose type changed.
    failed = runs.make(
        "failed",
        step_("validate_refund", "completed", started_at=ago(minutes=9), finished_at=ago(minutes=8)),
        step_(
            "issue_refund",
            "failed",
            error_class="Payments::GatewayTimeout",
            error_message="the payment gateway did not answer",
        ),
        workflow_class="RefundWorkflow",
        arguments={"customer": {"id": 42}, "amount": {"value": 1250, "currency": "EUR"}},
    )
    done = runs.make(
        "completed",
        step_("validate_refund", "completed"),
        step_("issue_refund", "completed"),
        workflow_class="RefundWorkflow",
        arguments={"customer": {"id": 42}, "amount": 990},
    )
    context, page = opened(chromium, (1280, 800))
    try:
        visit(page, f"{server}/workflows/compare?a={failed}&b={done}&locale=ja")
        said = page.locator("main").inner_text()
        assert "（" in said
        half = [line for line in said.splitlines() if "(" in line or ")" in line]
    finally:
        context.close()
    assert half == []


# Each occurrence of *word* in the page's text that a line break splits.
SPLIT_WORDS = """(word) => {
  const found = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  let node;
  while ((node = walker.nextNode())) {
    for (let at = node.nodeValue.indexOf(word); at >= 0; at = node.nodeValue.indexOf(word, at + 1)) {
      const range = document.createRange();
      range.setStart(node, at);
      range.setEnd(node, at + word.length);
      const lines = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)));
      if (lines.size > 1) found.push(node.nodeValue.trim().slice(0, 50));
    }
  }
  return found;
}"""


def test_japanese_prose_breaks_between_phrases_not_inside_words(chromium, app, server, runs, engine):
    paths = pages(app, runs, engine)
    context, page = opened(chromium, (390, 844))
    split = {}
    try:
        for name in ("index", "run", "insights", "operations", "workers", "locks"):
            visit(page, f"{server}{paths[name]}?locale=ja")
            for word in ("エラー", "ステップ", "ワークフロー", "ダッシュボード"):
                found = page.evaluate(SPLIT_WORDS, word)
                if found:
                    split[f"{name} {word}"] = found
    finally:
        context.close()
    assert split == {}, split


def test_the_insights_charts_have_a_time_axis_and_say_what_they_summarise(chromium, app, server, runs, engine):
    paths = pages(app, runs, engine)
    context, page = opened(chromium, (390, 844))
    found = {}
    try:
        for locale in ("en", "ja"):
            visit(page, f"{server}{paths['insights']}?locale={locale}")
            for bucket in ("hour", "day"):
                area = page.locator(f'.pgbus-activity-range[data-bucket="{bucket}"]')
                # The table lists newest first: its last row is the chart's left end.
                times = area.locator(".pgbus-activity-table tbody th")
                oldest, newest = times.last.inner_text().strip(), times.first.inner_text().strip()
                for series in ("started", "completed", "failed", "stuck"):
                    figure = area.locator(f'figure[data-series="{series}"]')
                    ends = figure.locator(".pgbus-chart-times span")
                    axis = [ends.nth(i).inner_text().strip() for i in range(ends.count())]
                    described = figure.evaluate(
                        "(el) => (el.getAttribute('aria-describedby') || '').split(' ').filter(Boolean)"
                        ".map(id => document.getElementById(id).textContent).join(' ')"
                    )
                    found[f"{locale} {bucket} {series}"] = (
                        axis == [oldest, newest],
                        oldest in described and newest in described,
                        figure.get_attribute("aria-hidden") is None,
                    )
    finally:
        context.close()
    assert all(all(checks) for checks in found.values()), found


def test_keys_for_an_incident(chromium, app, server, runs, engine):
    from support.browser import axe_violations

    from pgbus_web.i18n import force_locale, t

    pages(app, runs, engine)
    context, page = opened(chromium, (1280, 800))
    active = (
        "() => document.activeElement.id || document.activeElement.closest('tr')?.dataset.workflowId"
        " || document.activeElement.tagName"
    )
    try:
        visit(page, f"{server}/workflows?locale=de")
        rows = page.locator("#pgbus-runs tr.pgbus-run-row")
        first, second = rows.nth(0).get_attribute("data-workflow-id"), rows.nth(1).get_attribute("data-workflow-id")
        # "/" to the search box; typed there, the keys are letters.
        page.keyboard.press("/")
        assert page.evaluate(active) == "pgbus-search-q"
        page.keyboard.type("jg?a")
        assert page.locator("#pgbus-search-q").input_value() == "jg?a"
        assert page.locator("#pgbus-keys").evaluate("(el) => el.open") is False
        page.locator("#pgbus-search-q").fill("")
        page.evaluate("() => document.activeElement.blur()")
        # "g" then "a": the groups.
        page.keyboard.press("g")
        page.keyboard.press("a")
        assert page.evaluate(active) == "pgbus-attention"
        # "j" and "k" through the runs; Enter opens the one in focus.
        page.keyboard.press("j")
        assert page.evaluate(active) == first
        page.keyboard.press("j")
        assert page.evaluate(active) == second
        page.keyboard.press("k")
        assert page.evaluate(active) == first
        # "?" lists the keys, in the page's language; Escape closes it.
        page.keyboard.press("?")
        keys = page.locator("dialog#pgbus-keys")
        assert keys.evaluate("(el) => el.open && el.matches(':modal')")
        with force_locale("de"):
            assert t("pgbus.web.keys.attention") in keys.inner_text()
        assert axe_violations(page) == []
        page.keyboard.press("Escape")
        assert keys.evaluate("(el) => el.open") is False
        page.keyboard.press("j")
        page.keyboard.press("Enter")
        page.wait_for_url(f"**/workflows/{second}*")
    finally:
        context.close()


def test_the_single_keys_turn_off_and_on_and_stay_so(chromium, app, server, runs, engine):
    """WCAG 2.1.4: the keys' list has a switch for the single keys; off,
    "j" moves nothing, "/" leaves the search box alone and "?" opens
    nothing, and the top bar's button still opens the list; on again they
    work; the choice survives a reload."""
    from support.browser import axe_violations

    pages(app, runs, engine)
    context, page = opened(chromium, (1280, 800))
    active = (
        "() => document.activeElement.id || document.activeElement.closest('tr')?.dataset.workflowId"
        " || document.activeElement.tagName"
    )
    keys = page.locator("dialog#pgbus-keys")
    switch = page.locator("#pgbus-keys-use")
    try:
        visit(page, f"{server}/workflows")
        first = page.locator("#pgbus-runs tr.pgbus-run-row").nth(0).get_attribute("data-workflow-id")
        # The list opens from a button too, with the switch on.
        page.locator("#pgbus-keys-open").click()
        assert keys.evaluate("(el) => el.open")
        assert switch.is_checked()
        switch.uncheck()
        assert axe_violations(page) == []
        page.keyboard.press("Escape")
        assert keys.evaluate("(el) => el.open") is False
        page.evaluate("() => document.activeElement.blur()")
        for press in ("j", "/", "?", "g", "a"):
            page.keyboard.press(press)
            assert page.evaluate(active) == "BODY", press
        assert keys.evaluate("(el) => el.open") is False
        # Off after a reload too; the button still opens the list.
        visit(page, f"{server}/workflows")
        page.keyboard.press("j")
        page.keyboard.press("/")
        assert page.evaluate(active) == "BODY"
        page.locator("#pgbus-keys-open").click()
        assert keys.evaluate("(el) => el.open")
        assert not switch.is_checked()
        switch.check()
        page.keyboard.press("Escape")
        page.evaluate("() => document.activeElement.blur()")
        page.keyboard.press("j")
        assert page.evaluate(active) == first
        page.keyboard.press("/")
        assert page.evaluate(active) == "pgbus-search-q"
        # On after a reload.
        visit(page, f"{server}/workflows")
        page.keyboard.press("/")
        assert page.evaluate(active) == "pgbus-search-q"
    finally:
        context.close()


def test_the_focused_run_stays_in_place_while_new_runs_wait_above_it(chromium, database, runs):
    from support.action_support import operator_app

    from pgbus_web.rules import states

    # Five runs on a page of five: the focused last one would go to page 2.
    made = [paused_on_capture(runs, created_at=ago(hours=2, minutes=index)) for index in range(5)]
    server = serve(operator_app(database, actor_name=lambda request: "browser", refresh_interval=1, page_size=5))
    base = next(server)
    context, page = opened(chromium, (1280, 800))
    try:
        visit(page, f"{base}/workflows")
        link = page.locator("#pgbus-runs tr.pgbus-run-row a.pgbus-class").last
        link.focus()
        focused = page.evaluate("document.activeElement.closest('tr').dataset.workflowId")
        assert focused in made
        page.evaluate("document.activeElement.pgbusMark = 'kept'")
        top = page.evaluate("document.activeElement.getBoundingClientRect().top")
        # Layout shifts as the browser reports them, and those of anything
        # in the runs list (the operator's place).
        page.evaluate(
            "window.pgbusShift = 0; window.pgbusRunsShifted = []; new PerformanceObserver((list) => {"
            " for (const entry of list.getEntries()) { if "
            "(entry.hadRecentInput) continue; window.pgbusShift += entry.value;"
            "  for (const source of entry.sources) { const runs = document.getElementById('pgbus-runs');"
            "   if (source.node && runs && runs.contains(source.node)) "
            "window.pgbusRunsShifted.push(entry.value); } } })"
            ".observe({type: 'layout-shift', buffered: false})"
        )
        polls = []
        page.on(
            "response",
            lambda response: (
                polls.append(response.status) if response.request.headers.get("hx-trigger") == "pgbus-refresh" else None
            ),
        )
        newer = [runs.make(states.READY, step_("reserve_stock", "scheduled", scheduled_at=ago(minutes=1)))]
        bar = page.locator("#pgbus-new-runs")
        bar.wait_for(state="visible")
        # More arrive, more polls come: the list the operator is on waits.
        newer.append(runs.make(states.READY, step_("reserve_stock", "scheduled", scheduled_at=ago(minutes=1))))
        answered = len(polls)
        while len(polls) < answered + 5:
            page.wait_for_event("response")
        assert page.evaluate("document.activeElement.pgbusMark") == "kept"
        assert page.evaluate("document.activeElement.getBoundingClientRect().top") == top
        assert page.evaluate("window.pgbusRunsShifted") == []
        # The rest of the page: a new status's badge in the counts moves the
        # text after it sideways by a fraction of a pixel (4e-6 measured).
        assert page.evaluate("window.pgbusShift") < 0.001
        assert page.locator(f'#pgbus-runs tr[data-workflow-id="{newer[0]}"]').count() == 0
        # Opened, the new runs come in; the focused one went to page 2, so
        # focus goes to the list's first run, not to the page's body.
        bar.locator("button").click()
        page.locator(f'#pgbus-runs tr[data-workflow-id="{newer[1]}"]').wait_for()
        assert page.locator(f'#pgbus-runs tr[data-workflow-id="{focused}"]').count() == 0
        assert page.evaluate("document.activeElement.closest('tr')?.dataset.workflowId") == newer[1]
        assert not bar.is_visible()
    finally:
        context.close()
        server.close()
