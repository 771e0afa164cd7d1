"""Names another writer chose (a class, a step, a subject, an actor, a
reason) may hold bidirectional controls: U+202E RIGHT-TO-LEFT OVERRIDE
makes the rest of a line read backwards, so "paused by bob" could be
made to show as something else. Wherever such a name is shown it is
isolated, so its controls reach no further than the name itself:

- in HTML, inside ``<bdi>`` (or an element with ``dir="auto"``);
- in plain text (a sentence from the catalog, a ``<title>``, a confirm
  dialog), between U+2068 FIRST STRONG ISOLATE and U+2069 POP DIRECTIONAL
  ISOLATE, the plain-text form of ``<bdi>``. The name's own isolates are
  balanced first (an unmatched U+2069 dropped, an unclosed isolate
  closed), so it cannot close ours early or leave one open.

``html()`` turns the isolates of a plain-text sentence into ``<bdi>``
elements when the sentence is shown on a page. Names without any control
are left as they are: the text, the tests and the logs stay plain.
"""

from __future__ import annotations

from typing import Any

from markupsafe import Markup, escape

# U+202A-U+202E: embeddings and overrides; U+2066-U+2069: isolates;
# U+200E/U+200F: LRM/RLM; U+061C: ARABIC LETTER MARK.
CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")
LRI, RLI, FSI, PDI = "\u2066", "\u2067", "\u2068", "\u2069"
_OPENERS = {FSI: "", LRI: "ltr", RLI: "rtl"}


def has_controls(value: Any) -> bool:
    return isinstance(value, str) and not CONTROLS.isdisjoint(value)


def _balanced(text: str) -> str:
    out, depth = [], 0
    for char in text:
        if char in _OPENERS:
            depth += 1
        elif char == PDI:
            if depth == 0:
                continue  # would close the isolate around the name
            depth -= 1
        out.append(char)
    return "".join(out) + PDI * depth


def contained(text: str) -> bool:
    """True when every control of *text* sits inside an isolate that
    closes within it (a sentence isolate_text already made, or a name
    that isolates itself): it cannot reach past its own end."""
    depth = 0
    for char in text:
        if char in _OPENERS:
            depth += 1
        elif char == PDI:
            if depth == 0:
                return False
            depth -= 1
        elif char in CONTROLS and depth == 0:
            return False
    return depth == 0


def isolate_text(value: Any) -> Any:
    """*value* between FSI and PDI when it is text holding a control that
    could reach past it; as it is otherwise (Markup and non-text included,
    and a sentence whose names are isolated already)."""
    if isinstance(value, Markup) or not has_controls(value) or contained(value):
        return value
    return FSI + _balanced(value) + PDI


def isolate_html(value: Any) -> Any:
    """*value* for a page when it is text holding a control: its isolates
    as ``<bdi>`` elements (html). As it is otherwise (Markup is the
    caller's own markup, escaped later otherwise)."""
    if isinstance(value, Markup) or not has_controls(value):
        return value
    return html(isolate_text(value))


def html(text: Any) -> Markup:
    """A plain-text sentence for a page: escaped, each outermost isolate
    (FSI/LRI/RLI … its PDI: one isolate_text made) written as a ``<bdi>``
    element instead. The isolates inside a name stay characters, so the
    name reads back exactly as isolate_text balanced it."""
    if isinstance(text, Markup):
        return text
    text = "" if text is None else str(text)
    if not has_controls(text):
        return escape(text)
    # The outermost pairs that close: an opener without its PDI stays a character.
    closes: dict[int, int] = {}
    stack: list[int] = []
    for index, char in enumerate(text):
        if char in _OPENERS:
            stack.append(index)
        elif char == PDI and stack:
            start = stack.pop()
            if not stack:
                closes[start] = index
    parts: list[str] = []
    index = 0
    while index < len(text):
        end = closes.get(index)
        if end is None:
            parts.append(str(escape(text[index])))
            index += 1
            continue
        direction = _OPENERS[text[index]]
        opening = f'<bdi dir="{direction}">' if direction else "<bdi>"
        parts.append(opening + str(escape(text[index + 1 : end])) + "</bdi>")
        index = end + 1
    return Markup("".join(parts))
