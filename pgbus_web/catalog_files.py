"""The dashboard's catalog files: where they are and how a ``.po`` compiles.

A leaf on Babel alone, so the wheel's build hook (``hatch_build.py``) loads
it by path and compiles exactly as the running dashboard does: the same
entries left out (fuzzy, empty, a plural with an empty form), so they fall
back to English in both.
"""

from __future__ import annotations

import io
from pathlib import Path

from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po

# The gettext domain of the dashboard's catalogs: translations/<locale>/
# LC_MESSAGES/pgbus_web.po (and .mo in the wheel), never a host's "messages".
DOMAIN = "pgbus_web"


def po_path(root: Path, locale: str) -> Path:
    return root / locale / "LC_MESSAGES" / f"{DOMAIN}.po"


def mo_path(root: Path, locale: str) -> Path:
    return root / locale / "LC_MESSAGES" / f"{DOMAIN}.mo"


def locales(root: Path) -> list[str]:
    """The locales that have a catalog under *root*, source or compiled."""
    found = {p.parent.parent.name for p in root.glob(f"*/LC_MESSAGES/{DOMAIN}.po")}
    found |= {p.parent.parent.name for p in root.glob(f"*/LC_MESSAGES/{DOMAIN}.mo")}
    return sorted(found)


def compile_po(path: Path, locale: str) -> bytes:
    """The ``.mo`` bytes of the ``.po`` at *path*, without its fuzzy, empty
    and incomplete plural entries."""
    with open(path, "rb") as fp:
        catalog = read_po(fp, locale=locale)
    for message in list(catalog):
        if not message.id:
            continue
        forms = message.string if isinstance(message.string, (tuple, list)) else (message.string,)
        if message.fuzzy or not all(forms):
            catalog.delete(message.id, context=message.context)
    out = io.BytesIO()
    write_mo(out, catalog, use_fuzzy=False)
    return out.getvalue()
