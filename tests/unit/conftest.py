"""Fixtures of the executor and state-fault tests: a local cloud (no waiting, fixed seed), its
providers, a fresh SQLite store, and six roomy H100 pools of it. A module that needs another
``store`` (tests/unit/test_state.py: both backends) defines its own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fleet.model import Market, Offer
from fleet.state import StateStore, open_store
from providers.base import OfferQuery, Provider
from providers.local import LocalCloud


@pytest.fixture
def cloud(tmp_path: Path) -> LocalCloud:
    return LocalCloud.open(tmp_path / "cloud", time_scale=0, seed=7)


@pytest.fixture
def providers(cloud: LocalCloud) -> dict[str, Provider]:
    return {name: cloud.provider(name) for name in cloud.provider_names()}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    s = open_store(str(tmp_path / "state.db"))
    yield s
    s.close()


@pytest.fixture
def pools(providers: dict[str, Provider]) -> list[Offer]:
    """Six roomy H100 pools over two providers: five spot, one on-demand."""
    offers = [o for p in ("aws", "gcp") for o in providers[p].list_offers(OfferQuery(accelerators=("H100",)))]
    spot = sorted(
        (o for o in offers if o.market is Market.SPOT and (o.capacity_hint or 0) >= 8), key=lambda o: o.pool.id
    )
    od = sorted((o for o in offers if o.market is Market.ON_DEMAND), key=lambda o: o.pool.id)
    chosen = spot[:3] + [o for o in spot if o.pool.provider == "gcp"][:2] + od[:1]
    assert len({o.pool.id for o in chosen}) == 6
    return chosen
