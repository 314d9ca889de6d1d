"""The provider contract (``providers/base.py`` docstring), checked for every target."""

from __future__ import annotations

import pytest

from fleet.errors import (
    AuthError,
    MalformedResponseError,
    ProviderError,
    QuotaExceededError,
    RateLimitedError,
    TransientProviderError,
)
from fleet.model import TAG_FLEET, TAG_PLAN, TAG_POOL, LaunchRequest, Market, Offer, PoolKey, fleet_tags
from providers.base import BucketRef, OfferQuery, Provider, ReadsConsole, StorageSpec
from providers.registry import record, records


def _offer(harness, market: Market = Market.ON_DEMAND) -> Offer:
    offer = harness.offer(market)
    if offer is None:
        pytest.skip(f"{harness.provider.name} ({type(harness).__name__}) has no {market.value} pool")
    return offer


def _request(offer: Offer, count: int, token: str, fleet: str = "alpha", **extra) -> LaunchRequest:
    tags = {**fleet_tags(fleet, offer.pool, "plan1"), **extra.pop("tags", {})}
    return LaunchRequest(fleet=fleet, offer=offer, count=count, token=token, tags=tags, **extra)


def _ids(instances) -> list[str]:
    return [i.id for i in instances]


# ---- identity and offers ---------------------------------------------------------------


def test_provider_satisfies_the_protocol(provider):
    assert isinstance(provider, Provider)
    assert provider.name in records()
    assert provider.now() > 1.6e9


def test_offers_are_well_formed(provider):
    offers = provider.list_offers(OfferQuery())
    assert offers, "a provider with no offers cannot be planned for"
    ids = [o.pool.id for o in offers]
    assert len(ids) == len(set(ids)), "one offer per pool"
    for o in offers:
        assert o.pool.provider == provider.name
        assert PoolKey.from_id(o.pool.id) == o.pool
        assert o.price_per_hour >= 0 and o.accelerator
        # GPU types carry GPUs; a CPU-only type (for head nodes) is on-demand and says so
        assert o.gpus > 0 or (o.accelerator == "CPU" and o.market is Market.ON_DEMAND and o.vcpus)
        assert o.capacity_hint is None or o.capacity_hint >= 0
        if o.market is Market.ON_DEMAND:
            assert o.interruptions_per_hour == 0
        else:
            assert o.interruptions_per_hour > 0
            assert record(provider.name).spot
        if not record(provider.name).zones:
            assert o.pool.zone == ""


def test_offer_query_filters(provider):
    every = provider.list_offers(OfferQuery())
    acc = sorted({o.accelerator for o in every})[0]
    region = sorted({o.pool.region for o in every})[0]
    only_acc = provider.list_offers(OfferQuery(accelerators=(acc,)))
    assert only_acc and {o.accelerator for o in only_acc} == {acc}
    assert len(only_acc) == sum(1 for o in every if o.accelerator == acc)
    only_region = provider.list_offers(OfferQuery(regions=(region,)))
    assert only_region and {o.pool.region for o in only_region} == {region}
    on_demand = provider.list_offers(OfferQuery(spot=False))
    assert {o.market for o in on_demand} == {Market.ON_DEMAND}
    spot = provider.list_offers(OfferQuery(on_demand=False))
    assert {o.market for o in spot} <= {Market.SPOT}
    assert len(spot) + len(on_demand) == len(every)


# ---- launch ----------------------------------------------------------------------------


@pytest.mark.parametrize("market", [Market.ON_DEMAND, Market.SPOT])
def test_launch_tags_every_instance(harness, provider, market):
    offer = _offer(harness, market)
    result = provider.launch(_request(offer, 3, "tok-tags", tags={"team": "ml"}))
    assert len(result.instances) == 3 and not result.error_kind
    listed = {i.id: i for i in provider.list_instances("alpha")}
    assert set(listed) == set(_ids(result.instances))
    for inst in [*result.instances, *listed.values()]:
        assert inst.tags[TAG_FLEET] == "alpha"
        assert inst.tags[TAG_POOL] == offer.pool.id
        assert inst.tags[TAG_PLAN] == "plan1"
        assert inst.tags["team"] == "ml"
        assert inst.fleet == "alpha" and inst.pool == offer.pool
        assert inst.state.alive and inst.gpus == offer.gpus


def test_launch_adds_fleet_tags_the_request_forgot(harness, provider):
    offer = _offer(harness)
    req = LaunchRequest(fleet="alpha", offer=offer, count=1, token="tok-bare", tags={"team": "ml"})
    inst = provider.launch(req).instances[0]
    assert inst.tags[TAG_FLEET] == "alpha" and inst.tags[TAG_POOL] == offer.pool.id
    assert _ids(provider.list_instances("alpha")) == [inst.id]


@pytest.mark.parametrize("market", [Market.ON_DEMAND, Market.SPOT])
def test_launch_is_idempotent_on_token(harness, provider, market):
    offer = _offer(harness, market)
    first = provider.launch(_request(offer, 4, "tok-same"))
    again = provider.launch(_request(offer, 4, "tok-same"))
    assert _ids(again.instances) == _ids(first.instances)
    assert len(provider.list_instances("alpha")) == 4
    other = provider.launch(_request(offer, 1, "tok-other"))
    assert set(_ids(other.instances)).isdisjoint(_ids(first.instances))
    assert len(provider.list_instances("alpha")) == 5


def test_reused_token_with_other_parameters_is_refused(harness, provider):
    offer = _offer(harness)
    provider.launch(_request(offer, 2, "tok-mismatch"))
    with pytest.raises(ProviderError) as err:
        provider.launch(_request(offer, 3, "tok-mismatch"))
    assert err.value.code
    assert len(provider.list_instances("alpha")) == 2


@pytest.mark.parametrize("market", [Market.ON_DEMAND, Market.SPOT])
def test_partial_success_is_reported_not_raised(harness, provider, market):
    offer = _offer(harness, market)
    harness.limit_capacity(offer, 2)
    result = provider.launch(_request(offer, 5, "tok-partial"))
    assert len(result.instances) == 2
    assert result.error_kind == "capacity" and result.error_code and result.error_message
    assert len(provider.list_instances("alpha")) == 2
    retry = provider.launch(_request(offer, 5, "tok-partial"))  # the same request again: the same answer
    assert _ids(retry.instances) == _ids(result.instances) and retry.error_kind == "capacity"


def test_exhausted_pool_fails_fast_with_capacity_error(harness, provider):
    offer = _offer(harness)
    harness.limit_capacity(offer, 0)
    result = provider.launch(_request(offer, 3, "tok-none"))
    assert result.instances == () and result.error_kind == "capacity" and result.error_code
    assert provider.list_instances("alpha") == []


def test_capacity_error_is_not_retried_inside_the_adapter(harness, provider):
    offer = _offer(harness)
    harness.inject(offer, "capacity", 1)
    failed = provider.launch(_request(offer, 2, "tok-cap-1"))
    assert failed.instances == () and failed.error_kind == "capacity" and failed.error_code
    # one attempt consumed one fault: the next launch is not affected
    ok = provider.launch(_request(offer, 2, "tok-cap-2"))
    assert len(ok.instances) == 2 and not ok.error_kind


def test_a_few_throttles_are_absorbed_by_the_adapter(harness, provider):
    offer = _offer(harness)
    harness.inject(offer, "throttle", 2)
    result = provider.launch(_request(offer, 2, "tok-throttle"))
    assert len(result.instances) == 2 and not result.error_kind
    assert len(provider.list_instances("alpha")) == 2


def test_persistent_throttling_raises_rate_limited_after_retries(harness, provider):
    offer = _offer(harness)
    harness.inject(offer, "throttle", 100)
    with pytest.raises(RateLimitedError) as err:
        provider.launch(_request(offer, 2, "tok-throttled"))
    assert err.value.retryable and err.value.code and err.value.provider == provider.name
    assert provider.list_instances("alpha") == []


@pytest.mark.parametrize(
    "kind, error", [("server-error", TransientProviderError), ("quota", QuotaExceededError), ("auth", AuthError)]
)
def test_refusals_raise_their_error_class_and_create_nothing(harness, provider, kind, error):
    offer = _offer(harness)
    harness.inject(offer, kind, 1)
    with pytest.raises(error) as err:
        provider.launch(_request(offer, 2, "tok-refused"))
    assert err.value.code and err.value.provider == provider.name
    assert provider.list_instances("alpha") == []
    retry = provider.launch(_request(offer, 2, "tok-refused"))  # retrying the same token converges
    assert len(retry.instances) == 2 and len(provider.list_instances("alpha")) == 2


def test_launch_into_another_providers_pool_is_refused(harness, provider):
    offer = _offer(harness)
    other = "gcp" if provider.name != "gcp" else "aws"
    alien = offer.model_copy(update={"pool": offer.pool.model_copy(update={"provider": other})})
    with pytest.raises(ProviderError):
        provider.launch(_request(alien, 1, "tok-alien"))


# ---- list and terminate ------------------------------------------------------------------


def test_list_instances_returns_only_that_fleets(harness, provider):
    offer = _offer(harness)
    a = provider.launch(_request(offer, 2, "tok-a", fleet="alpha"))
    b = provider.launch(_request(offer, 3, "tok-b", fleet="beta"))
    harness.foreign(offer, 2)
    assert sorted(_ids(provider.list_instances("alpha"))) == sorted(_ids(a.instances))
    assert sorted(_ids(provider.list_instances("beta"))) == sorted(_ids(b.instances))
    assert provider.list_instances("gamma") == []


@pytest.mark.parametrize("variant", ["truncated", "html", "empty", "wrong-types"])
def test_a_malformed_listing_is_an_error_never_an_empty_fleet(harness, provider, variant):
    """Providers are untrusted: a 200 whose body cannot be read is a provider error (as a 5xx
    is), so `fleet down` never records a running fleet as down and a rebalance never launches
    beside nodes it cannot see."""
    offer = _offer(harness)
    ids = _ids(provider.launch(_request(offer, 2, "tok-malformed")).instances)
    harness.malform(variant, 1)
    with pytest.raises(MalformedResponseError) as err:
        provider.list_instances("alpha")
    assert isinstance(err.value, ProviderError) and err.value.provider == provider.name
    assert "could not be read" in str(err.value) and "\n" not in str(err.value)
    assert sorted(_ids(provider.list_instances("alpha"))) == sorted(ids)  # the next good answer is read


@pytest.mark.parametrize("market", [Market.ON_DEMAND, Market.SPOT])
def test_terminate_is_idempotent(harness, provider, market):
    offer = _offer(harness, market)
    ids = _ids(provider.launch(_request(offer, 3, "tok-term")).instances)
    provider.terminate(ids[:2])
    assert _ids(provider.list_instances("alpha")) == ids[2:]
    assert harness.alive(ids) == {ids[2]}
    provider.terminate(ids[:2])  # already gone: success
    provider.terminate([harness.missing_id()])  # never existed: success
    provider.terminate([])
    provider.terminate(ids)
    assert provider.list_instances("alpha") == [] and harness.alive(ids) == set()


def test_terminate_never_touches_untagged_instances(harness, provider):
    offer = _offer(harness)
    theirs = harness.foreign(offer, 2)
    ours = _ids(provider.launch(_request(offer, 1, "tok-mixed")).instances)
    provider.terminate([*theirs, *ours])
    assert harness.alive(theirs) == set(theirs)
    assert harness.alive(ours) == set()


def test_terminated_instances_leave_the_listing_for_good(harness, provider):
    offer = _offer(harness)
    ids = _ids(provider.launch(_request(offer, 2, "tok-gone")).instances)
    provider.terminate(ids)
    again = provider.launch(_request(offer, 2, "tok-gone"))  # replaying the token resurrects nothing
    assert not any(i.state.alive for i in again.instances)
    assert provider.list_instances("alpha") == [] and harness.alive(ids) == set()


# ---- optional abilities -------------------------------------------------------------------


def test_console_output_is_text_for_the_fleets_instances(harness, provider):
    if not isinstance(provider, ReadsConsole):
        pytest.skip(f"{provider.name} keeps no console log")
    offer = _offer(harness)
    (inst,) = provider.launch(_request(offer, 1, "tok-console")).instances
    assert isinstance(provider.console_output(inst), str)


# ---- storage -----------------------------------------------------------------------------


def test_ensure_bucket_is_idempotent(provider):
    spec = StorageSpec(provider=provider.name, bucket="alpha-checkpoints", region="r1")
    first = provider.ensure_bucket(spec)
    second = provider.ensure_bucket(spec)
    assert isinstance(first, BucketRef) and first == second
    assert first.bucket == "alpha-checkpoints" and "://" in first.uri and first.uri.endswith("alpha-checkpoints")


def test_ensure_bucket_refuses_a_bad_name(provider):
    with pytest.raises(ProviderError) as err:
        provider.ensure_bucket(StorageSpec(provider=provider.name, bucket="Bad_Name!"))
    assert "Bad_Name!" in str(err.value)
