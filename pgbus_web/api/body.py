"""A JSON request body, checked before anything is read or written: JSON
(``Content-Type: application/json``), at most csrf.MAX_BODY bytes (413
otherwise, from Werkzeug), an object, only the fields the endpoint knows,
each of its JSON type, and nothing jsonb cannot store (values.json_problem).
The result is the form the pages' parsers read (core/checks.py): every value
as text, so the API and the pages share one set of checks."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from flask import request

from ..core import problems
from ..models import values

STRING, OBJECT, INTEGER, BOOLEAN = "string", "object", "integer", "boolean"
NUMBER = "number"
# Any JSON value (a policy rule's).
ANY = "any"


class BodyError(Exception):
    def __init__(self, status: int, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field


def refused(refusal: problems.Refusal) -> BodyError:
    """The body refused in the refusal table's words (core/problems.py)."""
    return BodyError(refusal.status, refusal.message, field=refusal.field)


def _is(value: Any, kind: str) -> bool:
    if kind == ANY:
        return True
    if kind == STRING:
        return isinstance(value, str)
    if kind == OBJECT:
        return isinstance(value, dict)
    if kind == INTEGER:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == NUMBER:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, bool)


def _sent_other_than_json() -> bool:
    if request.is_json:
        return False
    # A form's bytes may be gone already (the CSRF check reads
    # request.form): its type and length still say that one was sent, and
    # read as empty it would act with every field dropped.
    return bool(request.mimetype) or bool(request.content_length) or bool(request.get_data(cache=True).strip())


def read(fields: Mapping[str, str], *, nulls: bool = False, not_null: tuple[str, ...] = ()) -> dict[str, Any]:
    """The body's fields (name -> JSON type of *fields*); null is absent
    (with *nulls*: kept as None, a PATCH's "remove this"), but refused as
    the wrong type for a field in *not_null* (an operation's filters: null
    there would read as no filter, every run). No body at all is an empty
    object; anything but JSON is 415."""
    if _sent_other_than_json():
        raise refused(problems.body_not_json_type())
    raw = request.get_data(cache=True)
    if not raw.strip():
        return {}
    try:
        text = raw.decode("utf-8")
        json.loads(text)
    except (ValueError, RecursionError) as problem:
        detail = getattr(problem, "msg", None) or str(problem)[:100] or type(problem).__name__
        raise refused(problems.body_not_json(detail)) from None
    # values.loads keeps a number a float cannot hold as the text it was
    # (RawJson): refused, rather than stored as another number.
    body = values.loads(text)
    if isinstance(body, values.RawJson):
        raise refused(problems.unstorable(text))
    if not isinstance(body, dict):
        raise refused(problems.body_not_object())
    found = values.json_problem(body)
    if found is not None:
        raise refused(problems.unstorable(found[1]))
    for name in body:
        if name not in fields:
            raise refused(problems.unknown_field(name, fields))
    given = {name: value for name, value in body.items() if value is not None or nulls or name in not_null}
    for name, value in given.items():
        if fields[name] == INTEGER and isinstance(value, float) and value.is_integer():
            # JSON Schema's integer: 182.0 is one.
            value = given[name] = int(value)
        if (value is not None or name in not_null) and not _is(value, fields[name]):
            raise refused(problems.wrong_type(name, fields[name]))
    return given


def as_form(given: Mapping[str, Any]) -> dict[str, str]:
    """The body's values as a form's text: an object as its JSON, a
    boolean as "1" or "" (the forms' checkbox), a number as its digits."""
    form: dict[str, str] = {}
    for name, value in given.items():
        if isinstance(value, bool):
            form[name] = "1" if value else ""
        elif isinstance(value, dict):
            form[name] = json.dumps(value, ensure_ascii=False)
        else:
            form[name] = str(value)
    return form
