"""Rendering a page, or one block of it for HTMX.

A fragment is a named block of the page's own template (jinja2-fragments'
``render_block``), so the HTMX answer and the full page are the same markup
and cannot drift. Each block's outermost element carries the id that names
it (``pgbus-run-header`` is block ``run_header``); with ``oob=True`` that
element also says ``hx-swap-oob``, so one answer can refresh several blocks.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from flask import Response, make_response, render_template
from jinja2_fragments.flask import render_block, render_blocks

from . import hx


def page(
    template: str,
    context: Mapping,
    fragments: Mapping[str, str],
    *,
    status: int = 200,
) -> Response:
    """The whole page, or, for an HTMX request that targets one of
    *fragments* (element id -> block name), that block alone."""
    block = requested_block(fragments)
    if block is not None:
        body = render_block(template, block, **context)
    else:
        body = render_template(template, **context)
    return make_response(body, status)


def requested_block(fragments: Mapping[str, str]) -> str | None:
    """The block an HTMX request targets, out of *fragments* (element id ->
    block name); None for a request that wants the whole page."""
    details = hx.details()
    if not details.wants_fragment:
        return None
    return fragments.get(details.target or "")


def fragments(template: str, blocks: Iterable[str], context: Mapping, *, oob: bool = True) -> str:
    """Several blocks of *template* in one answer; with *oob* each swaps
    itself into the element of the same id (hx-swap-oob)."""
    return render_blocks(template, list(blocks), **{**context, "oob": oob})
