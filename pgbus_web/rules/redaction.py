"""Which values of a run's arguments, its signals' payloads and its steps'
results the policy redacts, and the redaction itself.

A rule is a key name or a JSON path of keys joined by dots:

- ``card_number``: a key of that name at any depth;
- ``payload.token``: the key ``token`` inside the key ``payload`` at the
  root of the value (the arguments, a payload, a result);
- ``*.email``: ``*`` stands for any one key (``*.email`` is an ``email``
  one level down, wherever it is).

Arrays are walked through: ``lines.sku`` redacts the ``sku`` of every item
of the array ``lines``. A key is 1 to 64 letters, digits, ``_`` or ``-``
(the same keys the argument search can name); a path is at most 6 keys.
The redacted value, whatever it was, becomes ``MARK``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

MARK = "[redacted]"
KEY = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
MAX_DEPTH = 6
MAX_RULES = 200


class BadRule(ValueError):
    """A rule that is not a key name or a path of them."""

    def __init__(self, rule: Any) -> None:
        self.rule = str(rule)[:80]
        super().__init__(f"{self.rule!r} is not a key name or a JSON path of keys")


@dataclass(frozen=True)
class Rule:
    # The keys from the root; ("card_number",) with anywhere=True matches it at any depth.
    keys: tuple[str, ...]
    anywhere: bool

    @property
    def text(self) -> str:
        return ".".join(self.keys)


def parse(text: Any) -> Rule:
    if not isinstance(text, str):
        raise BadRule(text)
    keys = tuple(text.split("."))
    if not 1 <= len(keys) <= MAX_DEPTH or not all(key == "*" or KEY.match(key) for key in keys):
        raise BadRule(text)
    if keys == ("*",):
        raise BadRule(text)  # every value: not a redaction, an outage
    return Rule(keys, anywhere=len(keys) == 1)


def parse_all(texts: Iterable[Any]) -> tuple[Rule, ...]:
    return tuple(parse(text) for text in texts)


def _hit(rules: tuple[Rule, ...], path: tuple[str, ...]) -> bool:
    for rule in rules:
        if rule.anywhere:
            if path[-1] == rule.keys[0]:
                return True
        elif len(path) == len(rule.keys) and all(want in ("*", got) for want, got in zip(rule.keys, path, strict=True)):
            return True
    return False


def redact(value: Any, rules: tuple[Rule, ...]) -> Any:
    """*value* with every value a rule names replaced by MARK (a new
    structure; *value* is not changed). No rules: *value* itself."""
    if not rules:
        return value

    def walk(node: Any, path: tuple[str, ...]) -> Any:
        if isinstance(node, dict):
            out = {}
            for key, item in node.items():
                here = path + (str(key),)
                out[key] = MARK if _hit(rules, here) else walk(item, here)
            return out
        if isinstance(node, list):
            return [walk(item, path) for item in node]
        return node

    return walk(value, ())


def names(rules: tuple[Rule, ...], keys: tuple[str, ...]) -> bool:
    """True when a search of the path *keys* (array marks left out) asks
    about a value that a rule redacts, or a value holding one."""
    for length in range(1, len(keys) + 1):
        if _hit(rules, keys[:length]):
            return True
    return False
