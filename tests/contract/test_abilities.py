"""The contract of each optional ability (``providers/base.py``), run over every target that has
it (``isinstance``) and skipped, naming the ability, for the others. The required protocol's
contract is ``test_provider_contract.py``."""

from __future__ import annotations

import pytest

from fleet.errors import ProviderError
from fleet.model import InstanceState, LaunchRequest, Market, Offer, fleet_tags, interconnect_group
from providers.base import DatesEndings, LaunchesGroups, RaisesBids, ReadsBilledRate, ReportsQuotas, TearsDown


def _offer(harness, market: Market = Market.ON_DEMAND) -> Offer:
    offer = harness.offer(market)
    if offer is None:
        pytest.skip(f"{harness.provider.name} ({type(harness).__name__}) has no {market.value} pool")
    return offer


def _request(offer: Offer, count: int, token: str, fleet: str = "alpha") -> LaunchRequest:
    return LaunchRequest(
        fleet=fleet, offer=offer, count=count, token=token, tags=fleet_tags(fleet, offer.pool, "plan1")
    )


def _needs(provider, ability: type) -> None:
    if not isinstance(provider, ability):
        pytest.skip(f"{provider.name} ({type(provider).__name__}) has no {ability.__name__}")


# ---- TearsDown ------------------------------------------------------------------------------


def test_teardown_is_idempotent_and_touches_only_its_fleets(harness, provider):
    _needs(provider, TearsDown)
    offer = _offer(harness)
    alpha = [i.id for i in provider.launch(_request(offer, 1, "tok-td-a")).instances]
    beta = [i.id for i in provider.launch(_request(offer, 1, "tok-td-b", fleet="beta")).instances]
    foreign = harness.foreign(offer, 1)
    provider.terminate(alpha)
    assert provider.list_instances("alpha") == []
    first = provider.teardown("alpha")
    assert isinstance(first, list) and all(isinstance(n, str) and n for n in first)
    assert provider.teardown("alpha") == []  # idempotent: nothing left to delete
    assert harness.alive(beta) == set(beta) and harness.alive(foreign) == set(foreign)
    assert [i.id for i in provider.list_instances("beta")] == beta  # the other fleet still runs as before
    provider.terminate(beta)
    if first:  # what alpha had, beta had too: still there
        assert provider.teardown("beta")
    assert harness.alive(foreign) == set(foreign)


# ---- LaunchRequest.interconnect -----------------------------------------------------------------


def _interconnects(harness, provider) -> None:
    if not hasattr(harness, "interconnect"):
        pytest.skip(f"{provider.name} ({type(harness).__name__}) has no low-latency group to launch into")


def test_an_interconnect_launch_joins_one_group_that_teardown_removes(harness, provider):
    """A zone-level coupled plan's launches name a group (``LaunchRequest.interconnect``): it is
    made once, tagged with the fleet, holds every node of both launches, survives a rerun of
    the same token, and is gone after the instances end and ``teardown`` runs."""
    _interconnects(harness, provider)
    offer = _offer(harness, Market.SPOT) if harness.offer(Market.SPOT) else _offer(harness)
    name = interconnect_group("alpha", f"{offer.pool.provider}/{offer.pool.region}/{offer.pool.zone}")
    first = provider.launch(_request(offer, 2, "tok-ic-1").model_copy(update={"interconnect": name}))
    again = provider.launch(_request(offer, 2, "tok-ic-1").model_copy(update={"interconnect": name}))
    second = provider.launch(_request(offer, 1, "tok-ic-2").model_copy(update={"interconnect": name}))
    ids = sorted(i.id for i in first.instances + second.instances)
    assert sorted(i.id for i in again.instances) == sorted(i.id for i in first.instances)
    group = harness.interconnect(offer, name)
    assert group is not None and group["owner"] == "alpha"
    assert sorted(group["members"]) == ids
    provider.terminate(ids)
    assert name in provider.teardown("alpha")
    assert harness.interconnect(offer, name) is None
    assert provider.teardown("alpha") == []


def test_a_group_the_fleet_did_not_make_is_refused_and_left_alone(harness, provider):
    _interconnects(harness, provider)
    offer = _offer(harness)
    name = interconnect_group("alpha", "somewhere")
    harness.foreign_interconnect(offer, name)
    with pytest.raises(ProviderError, match="did not create"):
        provider.launch(_request(offer, 1, "tok-ic-foreign").model_copy(update={"interconnect": name}))
    assert provider.list_instances("alpha") == []
    provider.teardown("alpha")
    assert harness.interconnect(offer, name) is not None


# ---- ReportsQuotas ---------------------------------------------------------------------------


def test_quotas_name_only_their_own_provider(provider):
    _needs(provider, ReportsQuotas)
    quotas = provider.quotas()
    assert isinstance(quotas, list)
    for q in quotas:
        assert q.provider == provider.name, f"{provider.name} reported a quota of {q.provider}"
        assert q.limit >= 0 and q.in_use >= 0


# ---- DatesEndings ----------------------------------------------------------------------------


def test_ended_at_dates_what_ended_and_nothing_else(harness, provider):
    _needs(provider, DatesEndings)
    offer = _offer(harness)
    gone, kept = (i for i in provider.launch(_request(offer, 2, "tok-ended")).instances)
    provider.terminate([gone.id])
    told = provider.ended_at([gone.id, kept.id, harness.missing_id()])
    assert set(told) <= {gone.id}, "only an instance that ended is dated"
    if gone.id in told:
        assert told[gone.id] >= gone.launched_at - 1


# ---- ReadsBilledRate -------------------------------------------------------------------------


def test_billed_rates_price_only_what_was_asked_and_alive(harness, provider):
    _needs(provider, ReadsBilledRate)
    offer = _offer(harness)
    kept, gone = provider.launch(_request(offer, 2, "tok-billed")).instances
    provider.terminate([gone.id])
    rates = provider.billed_rates([kept, gone])
    assert set(rates) <= {kept.id}, "only the instances asked about, and alive, are priced"
    for rate in rates.values():
        assert rate.per_hour >= 0 and rate.source in ("instance", "spot-history", "price-api", "list")
    assert provider.billed_rates([]) == {}


def test_billed_rates_name_the_rental_of_the_market_launched(harness, provider):
    """A fresh instance of ours is priced, at a non-negative rate whose rental is that of the
    market it was launched into (a bid is how Vast rents spot)."""
    _needs(provider, ReadsBilledRate)
    for market in (Market.ON_DEMAND, Market.SPOT):
        offer = harness.offer(market)
        if offer is None:
            continue
        inst = provider.launch(_request(offer, 1, f"tok-billed-{market.value}")).instances[0]
        rate = provider.billed_rates([inst])[inst.id]
        assert rate.rental in ({"on-demand"} if market is Market.ON_DEMAND else {"spot", "bid"})
        provider.terminate([inst.id])


# ---- LaunchesGroups --------------------------------------------------------------------------


def test_a_group_launch_answers_each_request_in_order_and_is_idempotent(harness, provider):
    _needs(provider, LaunchesGroups)
    offers = [_offer(harness, Market.ON_DEMAND), _offer(harness, Market.SPOT)]
    requests = [_request(o, n, f"tok-group-{i}") for i, (o, n) in enumerate(zip(offers, (2, 1)))]
    results = provider.launch_group(requests)
    assert len(results) == len(requests)
    for request, result in zip(requests, results):
        assert len(result.instances) <= request.count
        assert all(i.pool == request.offer.pool and i.fleet == "alpha" for i in result.instances)
    made = {i.id for r in results for i in r.instances}
    again = provider.launch_group(requests)  # sized from what exists: nothing more
    assert {i.id for r in again for i in r.instances if i.state is not InstanceState.TERMINATED} <= made
    assert {i.id for i in provider.list_instances("alpha")} == made


# ---- RaisesBids -------------------------------------------------------------------------------


def test_an_outbid_instance_bids_again_within_the_caps(harness, provider):
    _needs(provider, RaisesBids)
    if not hasattr(harness, "outbid"):
        pytest.skip(f"{type(harness).__name__} cannot outbid an instance")
    offer = _offer(harness, Market.SPOT)
    ids = [i.id for i in provider.launch(_request(offer, 2, "tok-outbid")).instances]
    harness.outbid([ids[0]], min_bid=offer.price_per_hour * 1.1)
    states = {i.id: i.state for i in provider.list_instances("alpha")}
    assert states[ids[0]] is InstanceState.STOPPED and states[ids[1]].alive
    bid = provider.raise_bid(ids[0])
    assert bid >= offer.price_per_hour * 1.1
    assert {i.id: i.state for i in provider.list_instances("alpha")}[ids[0]].alive
    assert harness.alive(ids) == set(ids)
