"""The offline catalog shipped with the package and its filtering for a spec."""

from __future__ import annotations

import csv
from importlib import resources

from fleet.catalog import Catalog, cpu_offers, filter_for_spec, matching, snapshot_offers, snapshot_offers_of
from fleet.model import InterruptionSource, Market
from fleet.spec import parse_spec
from fleet.traces import all_traces, trace_for_zone
from providers.base import OfferQuery


def test_snapshot_has_every_launchable_row_once_per_market():
    rows = list(csv.DictReader(resources.files("fleet.data").joinpath("catalog/gpu_offers.csv").open()))
    launchable = [r for r in rows if r["instance_type"]]
    expected = sum(bool(r["on_demand_usd_per_hour"]) for r in launchable) + sum(
        bool(r["spot_usd_per_hour"]) and r["provider"] != "lambda" for r in launchable
    )
    offers = snapshot_offers()
    assert len(offers) == expected
    assert len({o.pool.id for o in offers}) == len(offers)


def test_the_offers_of_some_accelerators_are_the_snapshot_s_in_its_order():
    for accelerators in ({"H100", "H200"}, {"A100-80GB"}, {"NOSUCH"}):
        assert snapshot_offers_of(accelerators) == tuple(o for o in snapshot_offers() if o.accelerator in accelerators)


def test_a_query_naming_accelerators_gets_what_the_whole_snapshot_gives():
    query = OfferQuery(accelerators=("h100", "H200"), spot=False)
    offers, info = Catalog().offers(query, only=["aws", "lambda", "runpod"])
    whole = [o for o in (*snapshot_offers(), *cpu_offers()) if o.pool.provider in ("aws", "lambda", "runpod")]
    assert offers == matching(whole, query) and offers
    assert info.source == "snapshot"


def test_snapshot_marks_spot_risk_and_on_demand_safety():
    offers = snapshot_offers()
    assert all(o.interruptions_per_hour == 0 for o in offers if o.market is Market.ON_DEMAND)
    assert all(o.interruptions_per_hour > 0 for o in offers if o.market is Market.SPOT)
    # providers without spot appear as on-demand pools only
    assert {o.market for o in offers if o.pool.provider == "lambda"} == {Market.ON_DEMAND}


def test_gcp_h100_zones_with_a_trace_use_the_trace_rate():
    offers = [
        o
        for o in snapshot_offers()
        if o.pool.provider == "gcp"
        and o.market is Market.SPOT
        and o.pool.zone == "us-west1-b"
        and o.accelerator == "H100"
    ]
    assert offers
    trace = trace_for_zone("us-west1-b")
    for o in offers:
        assert o.interruption_source is InterruptionSource.TRACE
        assert o.interruptions_per_hour == trace.preemptions_per_hour


def test_traces_match_published_single_zone_availability():
    h100 = [t for t in all_traces() if t.name.startswith("h100/")]
    assert len(h100) == 13
    mean = sum(t.availability for t in h100) / len(h100)
    assert abs(mean - 0.762) < 0.01  # published k=1 figure for this trace set


def test_filter_for_spec_respects_accelerators_node_size_and_markets():
    spec = parse_spec("""
name: t1
capacity: {gpus: 8, accelerators: [H100], gpus_per_node: {min: 8, max: 8}}
providers: {aws: {spot: false}, gcp: {}}
""")
    got = filter_for_spec(snapshot_offers(), spec)
    assert got
    for o in got:
        assert o.accelerator == "H100" and o.gpus == 8
        assert o.pool.provider in {"aws", "gcp"}
        assert not (o.pool.provider == "aws" and o.market is Market.SPOT)


def test_catalog_without_providers_serves_the_snapshot_and_says_so():
    offers, info = Catalog().offers(OfferQuery(accelerators=("h100",), on_demand=False))
    assert info.source == "snapshot" and "2026-11-29" in info.detail
    assert offers and all(o.accelerator == "H100" and o.market is Market.SPOT for o in offers)


def test_offers_cli_filters_and_says_where_prices_come_from():
    import json

    from click.testing import CliRunner

    from fleet.cli.main import cli

    res = CliRunner().invoke(
        cli, ["offers", "-a", "h100", "--spot", "-p", "gcp", "--gpus", "8", "--limit", "0", "--json"]
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["source"] == "snapshot" and "2026-11-29" in data["detail"]
    assert data["total"] == len(data["offers"]) > 0
    prices = [o["price_per_hour"] / o["gpus"] for o in data["offers"]]
    assert prices == sorted(prices)
    for o in data["offers"]:
        assert (o["pool"]["provider"], o["pool"]["market"], o["accelerator"], o["gpus"]) == ("gcp", "spot", "H100", 8)
    table = CliRunner().invoke(cli, ["offers", "-a", "H100", "--on-demand", "--limit", "2"], env={"COLUMNS": "200"})
    assert table.exit_code == 0 and "on-demand" in table.output and "more; use --limit 0" in table.output


def test_pool_ids_are_plain_words_even_for_marketplace_locations():
    from fleet.catalog import vast_region

    assert vast_region("Texas, US, NA") == "us-texas"
    assert vast_region("The Netherlands, NL, EU") == "nl-the-netherlands"
    assert vast_region(", US, NA") == "us"
    for o in snapshot_offers():
        assert " " not in o.pool.id and "," not in o.pool.id, o.pool.id
