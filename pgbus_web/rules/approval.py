"""The approval rule: which operations wait for a second principal before
any run is touched. The policy holds it (core/policy.py); a process option
may add to it (tightened), never take from it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Approval:
    """Which operations wait for a second principal: those of *verbs*
    (None: every verb) that would act on more than *threshold* runs
    (None: none)."""

    threshold: int | None = None
    verbs: tuple[str, ...] | None = None
    # A process option's rule on top of the policy's (tightened).
    also: Approval | None = None

    def needed(self, verb: str, runs: int) -> bool:
        if self.also is not None and self.also.needed(verb, runs):
            return True
        if self.threshold is None:
            return False
        return (self.verbs is None or verb in self.verbs) and runs > self.threshold

    def tightened(self, threshold: int | None, verbs: tuple[str, ...] | None) -> Approval:
        """This rule with a process's own option on top: an operation
        waits when either says so. An option can only add waits."""
        if threshold is None:
            return self
        return Approval(self.threshold, self.verbs, also=Approval(threshold, verbs))
