#!/usr/bin/env python3
"""Check the message catalogs against the code and against English.

Fails (exit 1) when:
- a key the code or the templates use (extracted as babel.cfg says, plus
  the keys built at run time listed in DYNAMIC_KEYS) is not in English;
- a locale lacks a key English has, or has a key English does not;
- an entry is empty or fuzzy;
- a translation's placeholders (``%(name)s``) differ from English's, a
  plural entry has the wrong number of forms, or a ``%`` is not a
  placeholder (``%%`` for a literal percent sign).

``--fill`` appends every English key a locale lacks to that locale's
catalog, marked fuzzy with the English text, for a translator to do (the
check keeps failing until they are translated).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from babel.messages.extract import extract_from_dir
from babel.messages.frontend import parse_mapping_cfg
from babel.messages.pofile import read_po

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pgbus_web import locks
from pgbus_web.core.words import detail_keys, verb_labels
from pgbus_web.rules import states
from pgbus_web.rules.run_filters import RANGES

SOURCE_LOCALE = "en"
# The message functions of pgbus_web.i18n; the key is the first argument.
KEYWORDS = {"t": None, "t_html": None, "tn": None, "tn_html": None}
# Extracted strings that are message keys (the rest of what t() gets is not ours to check).
KEY_PREFIX = "pgbus."

PLACEHOLDER = re.compile(r"%\((\w+)\)s")
# Any % that is neither a named %(x)s placeholder nor an escaped %%.
STRAY_PERCENT = re.compile(r"%(?!\(\w+\)s|%)")


def _family(prefix: str, names) -> set[str]:
    return {f"{prefix}.{name}" for name in names}


W = "pgbus.workflows"
TIME_UNITS = ("seconds", "minutes", "hours", "days", "months", "years")
BULK_VERBS = ("resume", "retry", "skip", "cancel", "run_now", "pause")
NEXT_KEYS = (
    "ready",
    "due",
    "queued",
    "overdue",
    "running",
    "running_stalled",
    "stalled",
    "waiting",
    "waiting_timeout",
    "waiting_signal",
    "waiting_signal_timeout",
    "waiting_batch",
    "waiting_batch_timeout",
    "waiting_batch_unknown",
    "paused",
    "paused_error",
    "paused_timed_out",
    "completed",
    "failed",
    "failed_plain",
    "cancelled",
)

# Keys the code builds at run time ("pgbus.workflows.statuses." + status),
# which extraction cannot see: each family from the names in states.py.
DYNAMIC_KEYS = (
    _family(f"{W}.statuses", states.RUN + (states.STALLED, states.OVERDUE))
    | _family(f"{W}.step_statuses", states.STEP)
    | _family(f"{W}.signal_statuses", states.SIGNAL)
    | _family(f"{W}.events", states.EVENTS)
    | _family(f"{W}.audit.details", detail_keys.DETAIL_KEYS)
    | _family(f"{W}.attention.reasons", states.STUCK_REASONS)
    | _family(f"{W}.attention.confirm", BULK_VERBS + tuple(f"{v}_error" for v in BULK_VERBS))
    | _family(f"{W}.next", (f"{k}_html" for k in NEXT_KEYS))
    # Every verb's words, from their one table.
    | {
        key
        for words in verb_labels.WORDS.values()
        for key in (words.label, words.bulk, words.with_step, words.event)
        if key
    }
    | set(verb_labels.PLAN_WITH_STEP.values())
    | _family(
        f"{W}.timeline.series",
        ("waited", "queued", "waiting", "paused", "ran_ok", "ran_failed", "ran_open", "ran_cancelled"),
    )
    | _family("pgbus.time", (f"{u}_ago" for u in TIME_UNITS))
    | _family("pgbus.time", (f"in_{u}" for u in TIME_UNITS))
    | _family("pgbus.time.units", ("days", "hours", "minutes", "seconds", "milliseconds"))
    | _family(f"{W}.ranges", RANGES)
    | _family("pgbus.web.nav", ("workflows", "locks"))
    | _family(
        "pgbus.web.errors",
        (f"{name}{suffix}" for name in ("forbidden", "method", "not_found") for suffix in ("", "_title")),
    )
    | _family("pgbus.locks.states", locks.STATES)
    | _family("pgbus.operations.statuses", states.OPERATION)
    # Picked by a conditional expression, which extraction skips.
    | _family(
        "pgbus.locks",
        (
            "actions.release_confirm",
            "actions.release_live_confirm",
            "empty",
            "empty_filtered",
            "results.discarded",
            "results.discarded_kept",
        ),
    )
)


@dataclass
class Entry:
    key: str
    forms: tuple  # one string, or the plural forms
    plural: bool
    fuzzy: bool


@dataclass
class Catalog:
    locale: str
    num_plurals: int
    entries: dict = field(default_factory=dict)


def load(path: Path, locale: str) -> Catalog:
    with open(path, "rb") as fp:
        po = read_po(fp, locale=locale)
    catalog = Catalog(locale, po.num_plurals)
    for message in po:
        if not message.id:
            continue
        plural = isinstance(message.id, (tuple, list))
        key = message.id[0] if plural else message.id
        forms = tuple(message.string or ()) if plural else (message.string or "",)
        catalog.entries[key] = Entry(key, forms, plural, message.fuzzy)
    return catalog


def load_all(translations: Path) -> dict[str, Catalog]:
    return {
        path.parent.parent.name: load(path, path.parent.parent.name)
        for path in sorted(translations.glob("*/LC_MESSAGES/pgbus_web.po"))
    }


def extracted_keys(root: Path, config: Path) -> dict[str, str]:
    """Message keys passed as literals to t/t_html/tn/tn_html in the code
    and templates babel.cfg names, each with where it was first seen."""
    with open(config, encoding="utf-8") as fp:
        method_map, options_map = parse_mapping_cfg(fp, str(config))
    found: dict[str, str] = {}
    # Babel notes every f-string key on stderr; those are DYNAMIC_KEYS' job.
    with contextlib.redirect_stderr(io.StringIO()):
        for filename, lineno, message, _comments, _context in extract_from_dir(
            root, method_map, options_map, keywords=KEYWORDS
        ):
            key = message[0] if isinstance(message, (tuple, list)) else message
            # "pgbus.x." + name extracts as its prefix: a dynamic key.
            if key and key.startswith(KEY_PREFIX) and not key.endswith("."):
                found.setdefault(key, f"{filename}:{lineno}")
    return found


def placeholders(text: str) -> set[str]:
    return set(PLACEHOLDER.findall(text))


def check_entry(entry: Entry, english: Entry, num_plurals: int, locale: str) -> list[str]:
    where = f"{locale}: {entry.key}"
    if entry.fuzzy:
        return [f"{where}: fuzzy"]
    if not entry.forms or not all(entry.forms):
        return [f"{where}: empty"]
    if entry.plural != english.plural:
        return [f"{where}: {'plural' if english.plural else 'singular'} in English, not here"]
    problems = []
    if entry.plural and len(entry.forms) != num_plurals:
        problems.append(f"{where}: {len(entry.forms)} plural forms, the locale has {num_plurals}")
    wanted = set().union(*(placeholders(form) for form in english.forms))
    for form in entry.forms:
        if STRAY_PERCENT.search(form):
            problems.append(f"{where}: a % that is not %%(name)s or %%%%: {form!r}")
        extra = placeholders(form) - wanted
        if extra:
            problems.append(f"{where}: placeholders English lacks: {', '.join(sorted(extra))}")
    missing = wanted - set().union(*(placeholders(form) for form in entry.forms))
    if missing:
        problems.append(f"{where}: placeholders missing: {', '.join(sorted(missing))}")
    return problems


def check(translations: Path, used: dict[str, str]) -> tuple[list[str], list[str]]:
    """(problems, warnings) for the catalogs under *translations*, given
    the keys the code uses (key -> where)."""
    catalogs = load_all(translations)
    if SOURCE_LOCALE not in catalogs:
        return [f"no {SOURCE_LOCALE} catalog under {translations}"], []
    english = catalogs[SOURCE_LOCALE]
    problems: list[str] = []
    for key, where in sorted(used.items()):
        if key not in english.entries:
            problems.append(f"{SOURCE_LOCALE}: {key} is used ({where}) but not in the catalog")
    for locale, catalog in catalogs.items():
        for key, source in english.entries.items():
            entry = catalog.entries.get(key)
            if entry is None:
                problems.append(f"{locale}: {key} missing")
            else:
                problems.extend(check_entry(entry, source, catalog.num_plurals, locale))
        for key in sorted(set(catalog.entries) - set(english.entries)):
            problems.append(f"{locale}: {key} is not in English (remove it)")
    warnings = [
        f"{SOURCE_LOCALE}: {key} is neither extracted nor listed in DYNAMIC_KEYS"
        for key in sorted(set(english.entries) - set(used))
    ]
    return problems, warnings


def used_keys(root: Path = ROOT) -> dict[str, str]:
    used = {key: "DYNAMIC_KEYS" for key in DYNAMIC_KEYS}
    used.update(extracted_keys(root, root / "babel.cfg"))
    return used


def _po_string(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def fill(translations: Path) -> dict[str, int]:
    """Append the English keys each locale lacks, fuzzy, with English text."""
    catalogs = load_all(translations)
    english = catalogs[SOURCE_LOCALE]
    added = {}
    for locale, catalog in catalogs.items():
        missing = [key for key in english.entries if key not in catalog.entries]
        if not missing:
            continue
        lines = []
        for key in missing:
            source = english.entries[key]
            lines += ["", "#, fuzzy", f"msgid {_po_string(key)}"]
            if source.plural:
                lines.append(f"msgid_plural {_po_string(key)}")
                for index in range(catalog.num_plurals):
                    text = source.forms[min(index, len(source.forms) - 1)]
                    lines.append(f"msgstr[{index}] {_po_string(text)}")
            else:
                lines.append(f"msgstr {_po_string(source.forms[0])}")
        path = translations / locale / "LC_MESSAGES" / "pgbus_web.po"
        text = path.read_text(encoding="utf-8").rstrip("\n") + "\n" + "\n".join(lines) + "\n"
        path.write_text(text, encoding="utf-8")
        added[locale] = len(missing)
    return added


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--translations", type=Path, default=ROOT / "translations")
    parser.add_argument("--fill", action="store_true", help="append missing keys as fuzzy English")
    parser.add_argument("--warnings", action="store_true", help="also list keys nothing seems to use")
    args = parser.parse_args(argv)
    if args.fill:
        for locale, count in fill(args.translations).items():
            print(f"{locale}: {count} key(s) added as fuzzy")
    problems, warnings = check(args.translations, used_keys())
    if args.warnings:
        for warning in warnings:
            print(f"warning: {warning}")
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} problem(s) in the catalogs")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
