"""A redirect, typed as what it is: flask's redirect() answers with the
app's response class (flask's Response), though it is declared to return
werkzeug's."""

from __future__ import annotations

from typing import cast

from flask import Response, redirect


def see_other(location: str) -> Response:
    """A 303 to *location*: after a form's POST, the page to GET."""
    return cast(Response, redirect(location, 303))
