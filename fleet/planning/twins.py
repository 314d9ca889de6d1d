"""Interchangeable pools merged into one MILP column, and split back after the solve.

Pools with the same market, weighted GPUs per node, price, interruption rate and upper
bound, none running instances now, enter every row and objective of the planner's MILP
identically (catalogs are full of them: one instance type at one list price in many
zones). Branch and bound wastes its time permuting such twins, so ``Model`` gives each
group one integer column bounded by the members' summed bounds. Any count of a column can
be split over its members within their (equal) bounds, and spreading it round-robin in pool
id order uses as many pools as possible, which is what ``min_pools`` counts; so merging
loses no plan and no optimum.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from fleet.planning.candidates import Candidates


@dataclass(frozen=True)
class Twins:
    group: np.ndarray  # pool -> column
    first: np.ndarray  # column -> its first pool (in id order)
    size: np.ndarray  # column -> how many pools it merges

    @property
    def columns(self) -> int:
        return len(self.first)

    def merged(self, cand: Candidates) -> Candidates:
        """One entry per column: its first member's values and the members' summed bound."""
        return replace(cand.subset(self.first), upper=self.column_bound(cand.upper))

    def column_bound(self, upper: np.ndarray) -> np.ndarray:
        summed = np.bincount(self.group, weights=np.where(np.isinf(upper), 0.0, upper), minlength=self.columns)
        unbounded = np.bincount(self.group, weights=np.isinf(upper), minlength=self.columns) > 0
        return np.where(unbounded, np.inf, summed)

    def column_row(self, cols: np.ndarray, coefs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A row over pools as a row over columns (twins carry equal coefficients)."""
        merged, at = np.unique(self.group[cols], return_index=True)
        return merged, coefs[at]

    def spread(self, column_counts: np.ndarray) -> np.ndarray:
        """Per-pool counts: each column's count dealt round-robin over its members."""
        counts = column_counts[self.group].astype(np.int64)
        for col in np.flatnonzero((self.size > 1) & (column_counts > 0)):
            members = np.flatnonzero(self.group == col)
            base, extra = divmod(int(column_counts[col]), len(members))
            counts[members] = base + (np.arange(len(members)) < extra)
        return counts


def singletons(n: int) -> Twins:
    """No merging: one column per pool."""
    return Twins(np.arange(n), np.arange(n), np.ones(n, np.int64))


def find_twins(cand: Candidates, group: np.ndarray | None = None, alone: np.ndarray | None = None) -> Twins:
    """Group interchangeable pools (see the module docstring); pools running now and the
    pools in ``alone`` stay alone, and only pools of one ``group`` (the same failure domain
    and quotas, ``fleet.planning.domains``) share a column."""
    n = len(cand)
    if n == 0:
        return singletons(0)
    single = cand.current > 0
    if alone is not None and len(alone):
        single[alone] = True
    keys = np.stack(
        [
            cand.spot.astype(float),
            cand.weighted,
            cand.price,
            cand.rate,
            np.where(np.isinf(cand.upper), -1.0, cand.upper),
            np.where(single, np.arange(n), -1).astype(float),
            np.zeros(n) if group is None else group.astype(float),
        ],
        axis=1,
    )
    _, first, group = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    group = group.reshape(-1)
    # number columns in the order of their first pool, so the layout follows pool ids
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return Twins(group=rank[group], first=first[order], size=np.bincount(rank[group], minlength=len(order)))
