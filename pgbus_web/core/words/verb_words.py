"""Every verb's words in one table (message keys, translated when
drawn), read by the buttons and dialogs (verb_labels.py) and by the audit
trail's sentences (presenters.py)."""

from __future__ import annotations

from dataclasses import dataclass

from ...rules import verb_table

# One table of every verb's words, wherever the verb is offered or
# reported: its button on the run page and its name on an operation's
# dialog and page (label), a needs-attention group's button (bulk), the
# run page's button when it names the step (with_step) and the audit
# trail's word for it (event). Message keys, translated when drawn.
# "retry" is resume on a run paused on an error: the step that failed is
# tried again, so every place calls it Retry (docs/actions.md).
A, B, R, E = (
    "pgbus.workflows.actions",
    "pgbus.workflows.bulk.actions",
    "pgbus.workflows.resume",
    "pgbus.workflows.events",
)


@dataclass(frozen=True)
class VerbWords:
    label: str
    bulk: str | None = None
    with_step: str | None = None
    event: str | None = None


WORDS: dict[str, VerbWords] = {
    "resume": VerbWords(f"{A}.resume", f"{B}.resume", f"{R}.resume", f"{E}.resumed"),
    "retry": VerbWords(f"{A}.retry", f"{B}.retry", f"{R}.retry", f"{E}.retried"),
    "resume_at": VerbWords(f"{A}.resume_at"),
    "run_now": VerbWords(f"{A}.run_now"),
    "skip": VerbWords(f"{A}.skip", f"{B}.skip"),
    "rerun": VerbWords(f"{A}.rerun"),
    "cancel": VerbWords(f"{A}.cancel", f"{B}.cancel"),
    "pause": VerbWords(f"{A}.pause"),
    "reschedule": VerbWords(f"{A}.reschedule"),
    verb_table.SIGNAL: VerbWords(f"{A}.signal"),
}
