"""How available a policy that knows only the past can be, at a given cost: an optimistic bound.

A zone is lost whole and without notice (10-minute ticks; a node is lost at the start of the
tick its zone drops), and a replacement takes a cold start (one tick) to be ready. So a spot
node lost where no spare covers it costs at least one tick below target, and 99.9% at target
over 14 days (2,015 measured ticks) allows 2 such ticks. The relaxation below is kinder to the
policy than the simulator (docs/simulate.md says what it leaves out: signals beyond a zone's run
age, layouts with one zone uncovered and others spared):

* it knows each zone's **hazard** exactly: ``h_z(age)``, the chance the zone drops at the next
  tick given how long it has been up (run ages bucketed by powers of two), fitted on the very
  trace it is scored on;
* it knows which zones are up now, **moves for free** (no cold start, no make-before-break
  overlap) and refills spares at once; zones fail independently;
* each tick it picks a layout: ``k`` spare nodes (0, 1, 2, 3, 4 or 8) with no zone above ``k``
  spot nodes, on-demand for what the chosen zones do not hold, and pays only the nodes' prices.
  With ``k = 0`` a drop of any zone it holds is a tick below target; with ``k >= 1`` only two
  of its zones dropping in the same tick is.

Minimising ``cost + lambda * expected ticks below target`` tick by tick, over every subset of
the zones up, for a sweep of ``lambda``, traces the frontier: the least expected below-target
ticks at each cost. Any real past-only policy is above it (in expectation).
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from fleet.model import Market
from fleet.simulate.market import Replay

SPARES = (0, 1, 2, 3, 4, 8)


def _bucket(age: int) -> int:
    return int(math.log2(age)) if age >= 1 else 0


def hazards(up: np.ndarray) -> np.ndarray:
    """``h[z, t]``: chance zone ``z`` (up at ``t``) is down at ``t + 1`` given its run age at
    ``t``, fitted on ``up`` itself by age bucket; 0 where it is down."""
    zones, ticks = up.shape
    age = np.zeros_like(up, dtype=np.int64)
    for t in range(ticks):
        age[:, t] = np.where(up[:, t], (age[:, t - 1] if t else 0) + 1, 0)
    h = np.zeros(up.shape)
    for z in range(zones):
        seen: dict[int, list[int]] = {}
        for t in range(ticks - 1):
            if up[z, t]:
                b = seen.setdefault(_bucket(age[z, t]), [0, 0])
                b[0] += 1
                b[1] += not up[z, t + 1]
        for t in range(ticks):
            if up[z, t]:
                n, d = seen.get(_bucket(age[z, t]), [1, 0])
                h[z, t] = d / n
    return h


def frontier(
    replay: Replay, target: int, optimum_cost: float, lambdas: np.ndarray | None = None
) -> list[tuple[float, float, float]]:
    """(lambda, expected ticks below target, cost / optimum) of the relaxation for each lambda
    (1-GPU nodes of weight 1, as the benchmark's spec)."""
    spot = [o for o in replay.offers if o.market is Market.SPOT and o.pool.id in replay.capacity]
    od_price = min(o.price_per_hour for o in replay.offers if o.market is Market.ON_DEMAND)
    price = np.array([o.price_per_hour for o in spot])
    up = np.array([[c > 0 for c in replay.capacity[o.pool.id]] for o in spot])
    h = np.clip(hazards(up), 0.0, 0.999)
    zones, ticks = up.shape
    subsets = np.array(list(itertools.product((0, 1), repeat=zones)), dtype=bool)  # every subset
    size = subsets.sum(1)
    gap_h = replay.tick_seconds / 3600
    lambdas = np.logspace(0, 5, 61) if lambdas is None else lambdas
    cost = np.zeros(len(lambdas))
    risk = np.zeros(len(lambdas))
    for t in range(ticks - 1):
        ok = ~(subsets & ~up[:, t]).any(1)  # subsets of the zones up now
        s, m = subsets[ok], size[ok]
        p = np.where(s, price, 0.0)
        hz = np.where(s, h[:, t], 0.0)
        p0 = np.exp(np.log1p(-hz).sum(1))  # no held zone drops
        p1 = p0 * (hz / (1 - hz)).sum(1)  # exactly one drops
        costs, risks = [], []
        for k in SPARES:
            if k == 0:  # the whole fleet in one zone, or all on-demand
                one = m == 1
                costs += [target * p.sum(1)[one], [target * od_price]]
                risks += [1 - p0[one], [0.0]]
                continue
            # k nodes in each chosen zone (the dearest holds the rest), on-demand beyond them; a
            # subset with a zone more than the nodes need is left out (a smaller one holds them)
            need = target + k
            fit = k * (m - 1) < need
            spot_n = np.minimum(k * m, need)[fit]
            dearest = np.where(s[fit], price, 0.0).max(1, initial=0.0)
            spot_cost = k * p[fit].sum(1) - (k * m[fit] - spot_n) * dearest
            costs.append(spot_cost + (need - spot_n) * od_price)
            risks.append((1 - p0 - p1)[fit])
        c_all = np.concatenate([np.asarray(c, float) for c in costs])
        r_all = np.concatenate([np.asarray(r, float) for r in risks])
        pick = np.argmin(c_all[None, :] + lambdas[:, None] * r_all[None, :], axis=1)
        cost += c_all[pick] * gap_h
        risk += r_all[pick]
    return [(float(lam), float(r), float(c / optimum_cost)) for lam, r, c in zip(lambdas, risk, cost)]


def _along(pts: list[tuple[float, float]], x: float) -> float | None:
    """``y`` at ``x`` on the line through ``pts`` (sorted by ``x``): the lower hull, as two
    lambdas can share the ticks; the least ``y`` past the last point, ``None`` before the first."""
    if not pts or pts[0][0] > x:
        return None
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if x0 <= x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0) if x1 > x0 else min(y0, y1)
    return min(y for _x, y in pts)


def at_cost(points: list[tuple[float, float, float]], cost_ratio: float) -> float | None:
    """The least expected ticks below target within ``cost_ratio`` of the optimum (``None`` when
    nothing is that cheap)."""
    return _along(sorted((c, r) for _lam, r, c in points), cost_ratio)


def cost_for(points: list[tuple[float, float, float]], ticks_below: float) -> float | None:
    """The least cost (x optimum) with at most ``ticks_below`` expected ticks below target
    (``None`` when no point is that available)."""
    return _along(sorted((r, c) for _lam, r, c in points), ticks_below)
