"""Rendering a page, or one block of it for HTMX.

A fragment is a named block of the page's own template (jinja2-fragments'
``render_block``), so the HTMX answer and the full page are the same markup
and cannot drift. Each block's outermost element carries the id that names
it (``pgbus-run-header`` is block ``run_header``); with ``oob=True`` that
element also says ``hx-swap-oob``, so one answer can refresh several blocks.

A request may name several blocks in ``HX-Target``, comma-separated: the
live refresh asks for the blocks it swaps (its ``hx-select-oob`` picks each
by id), so a poll reads only their queries.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from flask import Response, make_response, render_template
from jinja2_fragments.flask import render_block, render_blocks
from markupsafe import Markup

from ...plumbing import hx
from ...plumbing.state import state
from . import page_cache

# Where the page was read, when it is not the replica it should be
# (plumbing/reading.py): on a whole page in the layout, on fragments
# swapped in beside them.
READ_NOTE_TEMPLATE = "pgbus_web/_read_note.html"


def page(
    template: str,
    context: Mapping,
    fragments: Mapping[str, str],
    *,
    status: int = 200,
) -> Response:
    """The whole page, or, for an HTMX request that targets one or more of
    *fragments* (element id -> block name), those blocks alone."""
    blocks = requested_blocks(fragments)
    if blocks:
        kept = page_cache.drawn(context, blocks, lambda drawing: _blocks(template, blocks, drawing))
        body: str = kept if kept is not None else _blocks(template, blocks, context)
        if state().database.replica is not None:
            # Drawn HTML (a kept drawing is Markup: a str added to it would be escaped).
            body = Markup(body) + Markup(render_template(READ_NOTE_TEMPLATE, oob=True))
    else:
        # A page read for every viewer alike (page_cache.py) has its content
        # drawn once; the page around it is this request's.
        content = page_cache.drawn(context, (CONTENT,), lambda drawing: render_block(template, CONTENT, **drawing))
        body = render_template(template, **context, drawn_content=content)
    return answer(body, status)


# The block of a page's template that layout.html places in <main>.
CONTENT = "content"


def _blocks(template: str, blocks: tuple[str, ...], context: Mapping) -> str:
    if len(blocks) == 1:
        return render_block(template, blocks[0], **context)
    return render_blocks(template, list(blocks), **context)


def answer(body: str, status: int) -> Response:
    """*body* with *status*; an htmx refusal (4xx) marked as one to show
    (hx.REFUSAL_HEADER), the one way the pages answer a refused request."""
    response = make_response(body, status)
    if 400 <= status < 500 and hx.details().request:
        response.headers[hx.REFUSAL_HEADER] = "1"
    return response


def requested_blocks(fragments: Mapping[str, str]) -> tuple[str, ...]:
    """The blocks an HTMX request targets, out of *fragments* (element id ->
    block name), in the page's order; empty for a request that wants the
    whole page, or names no block of this page."""
    details = hx.details()
    if not details.wants_fragment or not details.target:
        return ()
    named = {name.strip() for name in details.target.split(",")}
    return tuple(block for target, block in fragments.items() if target in named)


def fragments(template: str, blocks: Iterable[str], context: Mapping, *, oob: bool = True) -> str:
    """Several blocks of *template* in one answer; with *oob* each swaps
    itself into the element of the same id (hx-swap-oob)."""
    return render_blocks(template, list(blocks), **{**context, "oob": oob})
