"""Keep the newest N valid checkpoints; remove older ones and leftovers of crashed writers.

Promise: the newest ``keep_last`` checkpoints whose data object exists with its recorded size
are never deleted, however many newer broken commits sit above them, and nothing is deleted at
all while fewer than ``keep_last`` such checkpoints exist. Commits are removed before their data,
so a reader never finds a commit whose data was pruned on purpose.
"""

from __future__ import annotations

from fleet.checkpoint.index import committed_steps, data_intact, read_manifest
from fleet.checkpoint.layout import COMMIT_DIR, DATA_DIR, commit_key, committed_step, step_of
from fleet.checkpoint.stores.base import ObjectStore


def prune(store: ObjectStore, keep_last: int) -> list[int]:
    """Delete what falls below the ``keep_last`` newest valid checkpoints; returns removed steps."""
    steps = committed_steps(store)
    valid, oldest_kept = 0, None
    for step in steps:
        info = read_manifest(store, step)
        if info is not None and data_intact(store, info):
            valid += 1
            if valid == keep_last:
                oldest_kept = step
                break
    if oldest_kept is None:
        return []
    doomed = [s for s in steps if s < oldest_kept]
    for step in doomed:
        store.delete(commit_key(step))
    for key in store.list(DATA_DIR) + store.list(COMMIT_DIR):
        step = step_of(key)
        if step is not None and step < oldest_kept and committed_step(key) is None:
            store.delete(key)      # data of removed commits, orphans, partial leftovers
    return doomed
