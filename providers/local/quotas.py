"""Simulated account quotas of the local cloud: GPU limits per provider, region, market and
accelerator, the way GCP states its GPU quotas (AWS and Azure count vCPUs; the planner
handles both, the local cloud needs one).

The ``quotas`` table lives in ``providers.local.db``. A quota covers a vendor's pools in ``region`` ("" = all), of ``market`` ("" = both) and
``accelerator`` ("" = any); its use is the GPUs of every alive instance it covers, this
fleet's, other fleets' and foreign ones alike. Launches past a quota are cut to what fits
and answered with the vendor's quota error (``LaunchResult.error_kind == "quota"``).
"""

from __future__ import annotations

import sqlite3

from fleet.errors import FleetError
from fleet.model import Market, Offer, Quota
from providers.local import ledger


def set_quota(
    conn: sqlite3.Connection, provider: str, region: str, market: str, accelerator: str, gpus: int | None
) -> None:
    """Set (``gpus`` None: remove) one quota. FleetError for a bad market or a negative limit."""
    if market not in ("", Market.SPOT.value, Market.ON_DEMAND.value):
        raise FleetError(f"quota market {market!r} must be spot, on-demand or empty (both)")
    if gpus is None:
        conn.execute(
            "DELETE FROM quotas WHERE provider=? AND region=? AND market=? AND accelerator=?",
            (provider, region, market, accelerator),
        )
    elif gpus < 0:
        raise FleetError(f"a quota must be >= 0 GPUs (got {gpus})")
    else:
        conn.execute(
            "INSERT OR REPLACE INTO quotas VALUES (?, ?, ?, ?, ?)", (provider, region, market, accelerator, gpus)
        )


def quotas(conn: sqlite3.Connection, provider: str | None = None) -> list[Quota]:
    """The quotas of ``provider`` (None: every provider) with the GPUs in use under each now."""
    rows = conn.execute(
        "SELECT * FROM quotas"
        + (" WHERE provider=?" if provider else "")
        + " ORDER BY provider, region, market, accelerator",
        (provider,) if provider else (),
    ).fetchall()
    out = []
    for r in rows:
        q = Quota(
            provider=r["provider"],
            region=r["region"],
            market=Market(r["market"]) if r["market"] else None,
            accelerator=r["accelerator"],
            limit=r["gpus"],
        )
        out.append(q.model_copy(update={"in_use": float(_in_use(conn, q))}))
    return out


def _in_use(conn: sqlite3.Connection, q: Quota) -> int:
    sql = (
        f"SELECT pool, accelerator, SUM(gpus) FROM instances WHERE provider=? AND {ledger.ALIVE_SQL} "
        "GROUP BY pool, accelerator"
    )
    total = 0
    for pool, accelerator, gpus in conn.execute(sql, (q.provider,)):
        _, region, _, _, market = pool.split("/")
        if (
            (not q.region or region == q.region)
            and (q.market is None or market == q.market.value)
            and (not q.accelerator or accelerator == q.accelerator)
        ):
            total += gpus
    return total


def room(conn: sqlite3.Connection, offer: Offer) -> tuple[int, Quota | None]:
    """Nodes of ``offer`` the quotas still allow, and the quota that allows the fewest
    (``(large number, None)`` when none covers it)."""
    best, which = 1 << 30, None
    for q in quotas(conn, offer.pool.provider):
        if q.covers(offer):
            fits = max(0, int((q.limit - q.in_use) // offer.gpus))
            if fits < best:
                best, which = fits, q
    return best, which
