"""The runs index's search box as SQL: the run id by prefix or as a
fragment (the trigram index, when the database has it), the idempotency
key, the subject; and the containments of a JSON search (arguments,
signals' payloads). page_where (workflow_index.py) adds them to its WHERE.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..rules import run_filters

# The search box's id lengths: their home is the filters' rules, which the
# pages read too.
SEARCH_ID_PREFIX_MIN = run_filters.SEARCH_ID_PREFIX_MIN
SEARCH_ID_FRAGMENT_MIN = run_filters.SEARCH_ID_FRAGMENT_MIN
# A longer fragment is looked up in the trigram index by its first this
# many characters and checked whole on the runs found: each trigram more
# is one more posting list read (a whole uuid's read 819 buffers at a
# million runs, its first 8 characters 42; bench/search.py).
SEARCH_ID_FRAGMENT_WINDOW = 8
# The trigram index that serves the fragment search (its schema version): made
# only where the database has pg_trgm; without it a fragment is not looked
# for (it would read every run) and the prefix search stays.
FRAGMENT_INDEX = "pgbus_workflows_id_trgm"
_FRAGMENT_INDEX_PRESENT = sa.text("SELECT to_regclass(:index) IS NOT NULL")


def ascii_lower(value: str) -> str:
    """*value* with A-Z made a-z and nothing else changed: what PostgreSQL's
    lower() does under the "C" collation, which the run id search index
    uses, so the prefix's bounds computed here agree with it exactly."""
    return value.translate(_ASCII_LOWER)


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _successor(prefix: str) -> str | None:
    """The least text greater than every text that starts with *prefix*,
    in code point order (the "C" collation); None when there is none."""
    chars = list(prefix)
    while chars:
        code = ord(chars.pop()) + 1
        if 0xD800 <= code <= 0xDFFF:  # surrogates are no characters of UTF-8 text
            code = 0xE000
        if code <= 0x10FFFF:
            return "".join(chars) + chr(code)
    return None


def is_fragment(search: str | None) -> bool:
    """Whether the search box's *search* is also looked for inside run ids."""
    return search is not None and len(search) >= SEARCH_ID_FRAGMENT_MIN and len(search.split()) == 1


def fragment_index_present(conn: Connection) -> bool:
    """Whether this database has the fragment search's trigram index."""
    return bool(conn.execute(_FRAGMENT_INDEX_PRESENT, {"index": FRAGMENT_INDEX}).scalar_one())


def searches_fragments(conn: Connection, search: str | None) -> bool:
    """page_where's *fragments* for *search* on this database: whether it
    is a fragment and the index to find it is there (asked only then)."""
    return is_fragment(search) and fragment_index_present(conn)


def like_literal(text: str) -> str:
    """*text* as a LIKE pattern that matches exactly it: the pattern's
    characters (``%``, ``_`` and the escape, a backslash) escaped."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def search_where(search: str, *, fragments: bool = False) -> tuple[str, dict[str, Any]]:
    """The search box's condition over run ``w`` and its binds: any of

    - the run id, case-insensitive: by prefix from SEARCH_ID_PREFIX_MIN
      characters on (the short id the list shows), else whole; with
      *fragments* (the trigram index is there), also anywhere in it when
      the text is a fragment (is_fragment);
    - the idempotency key, case-insensitive;
    - the subject id alone (``1042``), or type and id (``order 1042``),
      case-insensitive.

    Every branch matches an expression index (the run id's as a range, so
    a bound plan can use it; the fragment's the trigram index), so the OR
    is a BitmapOr of index scans at any table size (bench/search.py)."""
    lowered = ascii_lower(search)
    binds: dict[str, Any] = {"search": search}
    branches = []
    high = _successor(lowered) if len(search) >= SEARCH_ID_PREFIX_MIN else None
    if high is not None:
        branches.append(
            '(lower(w.workflow_id COLLATE "C") >= :search_id_low'
            ' AND lower(w.workflow_id COLLATE "C") < :search_id_high)'
        )
        binds.update(search_id_low=lowered, search_id_high=high)
    else:
        branches.append('lower(w.workflow_id COLLATE "C") = :search_id_low')
        binds["search_id_low"] = lowered
    if fragments and is_fragment(search):
        # LIKE's default escape is the backslash like_literal writes.
        window = lowered[:SEARCH_ID_FRAGMENT_WINDOW]
        binds["search_id_window"] = "%" + like_literal(window) + "%"
        if window == lowered:
            branches.append('lower(w.workflow_id COLLATE "C") LIKE :search_id_window')
        else:
            branches.append(
                '(lower(w.workflow_id COLLATE "C") LIKE :search_id_window'
                ' AND strpos(lower(w.workflow_id COLLATE "C"), :search_id_fragment) > 0)'
            )
            binds["search_id_fragment"] = lowered
    branches.append("lower(w.idempotency_key) = lower(:search)")
    branches.append("lower(w.subject_id) = lower(:search)")
    parts = search.split(None, 1)
    if len(parts) == 2:
        branches.append(
            "(lower(w.subject_id) = lower(:search_subject_id) AND lower(w.subject_type) = lower(:search_subject_type))"
        )
        binds.update(search_subject_type=parts[0], search_subject_id=parts[1].strip())
    return "(" + " OR ".join(branches) + ")", binds


def json_where(column: str, documents: tuple[str, ...], bind: str) -> tuple[str, dict[str, Any]]:
    """*column* (jsonb) containing any of *documents* (JSON texts), as
    containments the column's GIN jsonb_path_ops index answers (an OR of
    them is a BitmapOr of its scans), and the binds, named from *bind*."""
    names = {f"{bind}_{n}": document for n, document in enumerate(documents)}
    condition = " OR ".join(f"{column} @> CAST(:{name} AS jsonb)" for name in names)
    return "(" + condition + ")", names
