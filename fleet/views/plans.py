"""What changed between consecutive applied plans of a fleet (pure: no I/O).

``diffs(plans)`` takes the applied plans oldest first (``StateStore.applied_plans``) and returns,
for each plan after the first, the pools whose count changed (``before`` -> ``after``, either
may be 0), the plan's strategy (``rebalance`` for a rebalancer's pass), its $/h and weighted
GPUs against the previous plan's, and when it was applied. A plan that changed no count and no
price (a rerun of ``fleet up``) is left out. Newest first, as a page reads them.
"""

from __future__ import annotations

from typing import Any

from fleet.model import Plan

EPS = 1e-9


def diffs(plans: list[tuple[Plan, float]]) -> list[dict[str, Any]]:
    """See the module doc."""
    out = []
    for (old, _), (new, at) in zip(plans, plans[1:]):
        before, after = old.counts(), new.counts()
        changes = [
            {"pool": p, "before": before.get(p, 0), "after": after.get(p, 0)}
            for p in sorted(set(before) | set(after))
            if before.get(p, 0) != after.get(p, 0)
        ]
        price_before, price_after = old.totals.price_per_hour, new.totals.price_per_hour
        if not changes and abs(price_after - price_before) < EPS:
            continue
        out.append(
            {
                "from": old.id,
                "to": new.id,
                "applied_at": at,
                "strategy": new.strategy,
                "changes": changes,
                "price_before": price_before,
                "price_after": price_after,
                "weighted_before": old.totals.weighted_gpus,
                "weighted_after": new.totals.weighted_gpus,
            }
        )
    return out[::-1]
