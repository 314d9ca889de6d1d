"""Which checkpoints to keep: the newest N valid ones, plus optionally every K-th step and the best
few by a recorded metric; remove the rest and the leftovers of crashed writers.

Promises:
- The newest ``keep_last`` checkpoints whose data object exists with its recorded size are never
  deleted, however many newer broken commits sit above them, and nothing is deleted at all while
  fewer than ``keep_last`` such checkpoints exist.
- With ``keep_every=K`` every valid checkpoint whose step is a multiple of K is kept as well.
- With ``keep_best=B`` and ``metric=NAME`` the B valid checkpoints with the lowest (``mode="min"``)
  or highest (``mode="max"``) value of NAME, as recorded by ``save(..., metrics={NAME: x})``, are
  kept as well; checkpoints without that metric never count as best. Ties keep the newer step.
- Only what lies below the oldest of the newest ``keep_last`` is ever removed, and only objects
  named as this layout names what it writes (``layout.ours``): a file someone else put in the
  location is never deleted. Commits are removed before their data, so a reader never finds a
  commit whose data was pruned on purpose.
"""

from __future__ import annotations

from dataclasses import dataclass

from fleet.checkpoint.errors import CheckpointError
from fleet.checkpoint.index import committed_steps, data_intact, read_manifest
from fleet.checkpoint.layout import COMMIT_DIR, DATA_DIR, CheckpointInfo, commit_key, committed_step, ours, step_of
from fleet.checkpoint.stores.base import ObjectStore


@dataclass(frozen=True)
class Retention:
    """A retention policy (see the module docstring); :meth:`check` validates it."""

    keep_last: int = 3
    keep_every: int = 0
    keep_best: int = 0
    metric: str = ""
    mode: str = "min"

    def check(self) -> Retention:
        """Return self; raise :class:`CheckpointError` naming the first bad option."""
        for name in ("keep_last", "keep_every", "keep_best"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < (1 if name == "keep_last" else 0):
                least = 1 if name == "keep_last" else 0
                raise CheckpointError(f"{name} must be a whole number >= {least}, got {value!r}")
        if self.mode not in ("min", "max"):
            raise CheckpointError(f"mode must be 'min' or 'max', got {self.mode!r}")
        if self.keep_best and not self.metric:
            raise CheckpointError("keep_best needs metric=NAME (a value passed as save(..., metrics={NAME: x}))")
        return self

    @property
    def scans_all(self) -> bool:
        """Whether choosing what to keep needs every manifest, not just the newest N."""
        return bool(self.keep_every or self.keep_best)

    def extras(self, valid: list[CheckpointInfo]) -> list[CheckpointInfo]:
        """Checkpoints kept beyond the newest N: every K-th step and the best by the metric."""
        kept = [i for i in valid if self.keep_every and i.step % self.keep_every == 0]
        if self.keep_best:
            sign = 1.0 if self.mode == "min" else -1.0
            scored = [i for i in valid if self.metric in i.metrics]
            kept += sorted(scored, key=lambda i: (sign * i.metrics[self.metric], -i.step))[: self.keep_best]
        return kept


def prune(store: ObjectStore, policy: Retention | int) -> list[int]:
    """Delete what ``policy`` does not keep (an int means keep the last N); returns removed steps."""
    policy = Retention(keep_last=policy) if isinstance(policy, int) else policy
    steps = committed_steps(store)
    valid: list[CheckpointInfo] = []
    for step in steps:
        info = read_manifest(store, step)
        if info is not None and data_intact(store, info):
            valid.append(info)
            if len(valid) == policy.keep_last and not policy.scans_all:
                break
    if len(valid) < policy.keep_last:
        return []
    oldest_kept = valid[policy.keep_last - 1].step
    kept = {i.step: i for i in [*valid[: policy.keep_last], *policy.extras(valid)]}
    kept_data = {part.key for i in kept.values() for part in i.objects}
    doomed = [s for s in steps if s < oldest_kept and s not in kept]
    for step in doomed:
        store.delete(commit_key(step))
    for key in store.list(DATA_DIR) + store.list(COMMIT_DIR):
        step = step_of(key)
        if (
            step is not None
            and step < oldest_kept
            and committed_step(key) is None
            and key not in kept_data
            and ours(key)
        ):
            store.delete(key)  # data of removed commits, orphans, partial leftovers
    return doomed
