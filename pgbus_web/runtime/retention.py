"""Retention: finished runs (completed, failed, cancelled) last updated
before a cutoff are deleted with their steps, events and signals (the
reference's ``stale`` scope). Never an ongoing run: the status is tested in
the DELETE itself. In batches, each its own short transaction, so that a
large prune neither holds locks long nor grows one huge transaction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.engine import Engine

from ..models import workflow_upkeep

BATCH = 1000


@dataclass(frozen=True)
class PruneResult:
    found: int  # stale runs when it started
    deleted: int  # 0 on a dry run


def prune(
    engine: Engine,
    *,
    before: datetime,
    dry_run: bool = False,
    batch: int = BATCH,
    progress: Callable[[int], None] | None = None,
) -> PruneResult:
    """Delete the finished runs last updated before *before*; *progress*
    is told how many each batch took."""
    with engine.connect() as conn:
        found = workflow_upkeep.count_stale(conn, before=before)
    if dry_run:
        return PruneResult(found, 0)
    deleted = 0
    while True:
        with engine.begin() as conn:
            taken = workflow_upkeep.delete_stale(conn, before=before, limit=batch)
        deleted += taken
        if progress and taken:
            progress(taken)
        if taken < batch:
            return PruneResult(found, deleted)
