"""Placement: every node of a plan in one zone, region or provider, the best one exactly
(fleet.planning.placement), checked against exhaustive search (planner_oracle) and against
solving every domain with the plain MILP."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from planner_oracle import brute_force, domain_of, offer, random_offers

from fleet.catalog import filter_for_spec, snapshot_offers
from fleet.cli.main import cli
from fleet.cli.render import placement_lines
from fleet.errors import SpecError
from fleet.model import Market, Plan, Quota
from fleet.planning import domain_bounds, milp, placement, relaxation, strategies
from fleet.planning.candidates import select
from fleet.planning.domains import Domains, limits_for
from fleet.planning.planner import plan
from fleet.spec import Placement, load_spec, parse_spec

ROOT = Path(__file__).resolve().parents[2]
COUPLED_EXAMPLE = ROOT / "examples" / "llm-pretrain-coupled.yaml"
SETTINGS = settings(max_examples=50, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


def spec_of(
    level: str | None,
    kind: str = "coupled",
    gpus: int = 8,
    on_demand: int = 0,
    strategy: str = "price-capacity-optimized",
    extra: str = "",
) -> object:
    lines = [
        f"name: placed\ncapacity: {{gpus: {gpus}, accelerators: {{H100: 1.0, A100-80GB: 0.6}}, "
        f"on_demand_gpus: {on_demand}}}",
        f"workload: {{kind: {kind}, restart_seconds: 600}}",
        f"strategy: {strategy}",
        "diversification: {max_pool_share: 0.5, min_pools: 2}",
    ]
    if level is not None:
        lines.append(f"placement: {level}")
    return parse_spec("\n".join(lines) + "\n" + extra)


@st.composite
def instances(draw):
    """Up to five pools over two providers, two regions and two zones each, so domains of
    every level hold several pools."""
    pools = []
    for i in range(draw(st.integers(1, 5))):
        pools.append(
            offer(
                provider=draw(st.sampled_from(["aws", "gcp"])),
                region=draw(st.sampled_from(["r1", "r2"])),
                zone=draw(st.sampled_from(["a", "b"])),
                itype=f"t{i}",
                spot=draw(st.booleans()),
                acc=draw(st.sampled_from(["H100", "A100-80GB"])),
                gpus=draw(st.sampled_from([1, 2, 4])),
                price=draw(st.integers(5, 200)) / 20,
                rate=draw(st.integers(0, 150)) / 100,
                hint=draw(st.one_of(st.none(), st.integers(0, 3))),
            )
        )
    target = draw(st.integers(1, 6))
    spec = spec_of(
        draw(st.sampled_from([None, "zone", "region", "provider"])),
        kind=draw(st.sampled_from(["coupled", "coupled", "independent"])),
        gpus=target,
        on_demand=draw(st.integers(0, target)) if draw(st.booleans()) else 0,
        strategy=draw(st.sampled_from(["price-capacity-optimized", "lowest-price"])),
    )
    return spec, pools


@SETTINGS
@given(case=instances())
def test_a_placed_plan_never_spans_two_domains_and_is_optimal(case):
    spec, pools = case
    if not any(o.capacity_hint != 0 for o in pools):
        return
    p = plan(spec, pools)
    level = spec.placement_level
    used = {domain_of(a.offer, level) for a in p.allocations if a.count}
    assert len(used) <= 1, f"plan spans {sorted(used)} under placement {level}"
    _, best = brute_force(spec, pools)
    assert p.feasible == (best is not None), p.shortfall
    if best is None:
        return
    assert p.placement is not None and p.placement.level == level and used == {p.placement.domain}
    got = p.totals.price_per_hour if spec.strategy.value == "lowest-price" else p.totals.true_cost_per_hour
    assert got == pytest.approx(best.key[0], rel=1e-5, abs=1e-6)
    assert p.placement.objective == pytest.approx(got, rel=1e-9)
    if p.placement.runner_up_objective is not None:
        assert p.placement.runner_up_objective >= got - 1e-9


def synthetic(rng: random.Random, n: int) -> list:
    """``n`` offers over 2 providers x 6 regions x 2 zones, priced and rated at random."""
    return random_offers(rng, n)


def _plain_milp_per_region(spec, offers: list, quotas: list = ()) -> tuple[list[tuple[str, float]], int]:
    """(region, objective) of every region that meets ``spec`` (32 GPUs, 8 on-demand, min_pools
    2), each solved by the plain MILP (no pruning, twins or fixing), best first; and how many
    regions there are."""
    cand = select(spec, offers)
    limits = limits_for(spec, cand.weighted[cand.spot], quotas)
    members, names = placement.domains_of(cand, "region")
    values = {}
    for name, m in zip(names, members):
        sub = cand.subset(m)
        model = milp.Model(sub, 32.0, 8.0, None, 2, reduce=False, limits=limits)
        out = strategies.solve(spec.strategy, model, spec.workload, replan=False)
        if out.counts is not None:
            values[name] = placement.value_of(
                spec, sub, out.counts, 0.0, strategies.independent_costs(sub, spec.workload)
            )[0]
    return sorted(values.items(), key=lambda kv: (kv[1], kv[0])), len(names)


@pytest.mark.parametrize("seed,kind", [(0, "coupled"), (1, "coupled"), (2, "independent")])
def test_the_bounded_search_matches_the_plain_milp_in_every_domain(seed, kind):
    """The domains skipped by their lower bound cannot beat the winner or the runner-up:
    solving every region with the plain MILP (no pruning, twins or fixing) agrees."""
    rng = random.Random(seed)
    offers = synthetic(rng, 160)
    spec = spec_of("region", kind=kind, gpus=32, on_demand=8)
    p = plan(spec, offers)
    ranked, regions = _plain_milp_per_region(spec, offers)
    assert p.feasible and p.placement.domain == ranked[0][0]
    assert p.totals.true_cost_per_hour == pytest.approx(ranked[0][1], rel=1e-6)
    assert p.placement.runner_up_objective == pytest.approx(ranked[1][1], rel=1e-6)
    assert p.placement.domains == regions and p.placement.solved <= regions


def _capped_spec(kind: str) -> object:
    """One region per plan, a zone cap below it and (with ``_quotas``) per-provider quotas."""
    return parse_spec(
        "name: placed\ncapacity: {gpus: 32, accelerators: {H100: 1.0, A100-80GB: 0.6}, "
        f"on_demand_gpus: 8}}\nworkload: {{kind: {kind}, restart_seconds: 600}}\n"
        "diversification: {max_pool_share: 0.5, min_pools: 2, max_zone_share: 0.5}\nplacement: region\n"
    )


def _quotas() -> list:
    return [
        Quota(provider=p, market=m, limit=lim)
        for p in ("aws", "gcp", "azure")
        for m, lim in ((Market.SPOT, 12), (Market.ON_DEMAND, 24))
    ]


@pytest.mark.parametrize("seed,kind", [(3, "coupled"), (4, "coupled"), (5, "independent")])
def test_placed_plans_under_caps_and_quotas_match_the_plain_milp_in_every_domain(seed, kind):
    """With a zone cap and quotas the bounds are looser and the domains' walks carry cap and
    quota rows: solving every region with the plain MILP (no pruning, twins, fixing or
    cutoffs) still finds the same winner, value and runner-up."""
    rng = random.Random(seed)
    offers = synthetic(rng, 160)
    spec, quotas = _capped_spec(kind), _quotas()
    p = plan(spec, offers, quotas=quotas)
    ranked, _ = _plain_milp_per_region(spec, offers, quotas)
    assert len(ranked) >= 2 and p.feasible and p.placement.domain == ranked[0][0]
    assert p.totals.true_cost_per_hour == pytest.approx(ranked[0][1], rel=1e-6)
    assert p.placement.runner_up_objective == pytest.approx(ranked[1][1], rel=1e-6)


def test_quotas_and_caps_only_tighten_a_domain_bound():
    """The quota multipliers searched for the independent costs must not weaken a coupled
    job's frontier bound below the bound without them (they once did, so nearly every
    domain was solved)."""
    rng = random.Random(7)
    offers = synthetic(rng, 160)
    spec, quotas = _capped_spec("coupled"), _quotas()
    cand = select(spec, offers)
    limits = limits_for(spec, cand.weighted[cand.spot], quotas)
    members, _ = placement.domains_of(cand, "region")
    bound = Domains.bind(limits, cand)
    rows = relaxation.QuotaRows(bound.quota_units, bound.headroom)
    spread = relaxation.Spread(bound.keys["zone"], max(0.5 * 24, limits.floor))
    plain = domain_bounds.lower_bounds(spec, cand, members)
    tight = domain_bounds.lower_bounds(spec, cand, members, rows, spread)
    finite = np.isfinite(plain)
    assert finite.sum() >= 3
    assert (tight[finite] >= plain[finite] * (1 - 1e-9)).all()
    assert (tight[finite] > plain[finite] * (1 + 1e-6)).any()


@pytest.mark.parametrize(
    "level,caps,quota",
    [("zone", "", 0), ("region", ", max_zone_share: 0.25", 12), ("provider", ", max_region_share: 0.5", 20)],
)
def test_lower_bounds_never_exceed_a_domain_optimum(level, caps, quota):
    """Also with a cap over finer domains and a quota in the bound (``Spread``, ``QuotaRows``)."""
    rng = random.Random(5)
    offers = synthetic(rng, 120)
    spec = parse_spec(
        f"name: placed\ncapacity: {{gpus: 16, accelerators: {{H100: 1.0, A100-80GB: 0.6}}, "
        f"on_demand_gpus: 4}}\nworkload: {{kind: coupled, restart_seconds: 600}}\n"
        f"diversification: {{max_pool_share: 0.5, min_pools: 2{caps}}}\nplacement: {level}\n"
    )
    quotas = [Quota(provider="aws", market=Market.SPOT, limit=quota)] if quota else []
    cand = select(spec, offers)
    limits = limits_for(spec, cand.weighted[cand.spot], quotas)
    members, _ = placement.domains_of(cand, level)
    bound = Domains.bind(limits, cand)
    inner = [(lv, s) for lv, s in limits.shares if lv != "pool"]
    spread = relaxation.Spread(bound.keys[inner[0][0]], max(inner[0][1] * 12, limits.floor)) if inner else None
    bounds = domain_bounds.lower_bounds(
        spec, cand, members, relaxation.QuotaRows(bound.quota_units, bound.headroom), spread
    )
    solved = 0
    for b, m in zip(bounds, members):
        sub = cand.subset(m)
        out = strategies.solve(
            spec.strategy, milp.Model(sub, 16.0, 4.0, None, 2, reduce=False, limits=limits), spec.workload, replan=False
        )
        if out.counts is not None:
            solved += 1
            value = placement.value_of(spec, sub, out.counts, 0.0, strategies.independent_costs(sub, spec.workload))
            assert b <= value[0] * (1 + 1e-9)
    assert solved >= 2


def test_a_domain_that_cannot_cover_leaves_the_other_domains_bounds_as_they_are():
    """The coupled bounds of all domains are computed together (``Bounds``): a domain whose pools
    cannot hold the target (infinite bound) must not disturb the others'."""
    rng = random.Random(9)
    offers = synthetic(rng, 120)
    small = [
        o.model_copy(update={"pool": o.pool.model_copy(update={"region": "tiny"}), "capacity_hint": 1})
        for o in offers[:3]
    ]
    spec = parse_spec(
        "name: placed\ncapacity: {gpus: 16, accelerators: {H100: 1.0, A100-80GB: 0.6}, "
        "on_demand_gpus: 4}\nworkload: {kind: coupled, restart_seconds: 600}\n"
        "diversification: {max_pool_share: 0.5, min_pools: 2}\nplacement: region\n"
    )
    cand = select(spec, offers + small)
    members, names = placement.domains_of(cand, "region")
    together = domain_bounds.Bounds(spec, cand, members)
    assert any(not np.isfinite(b) for b in together.first)
    for d, m in enumerate(members):
        alone = domain_bounds.Bounds(spec, cand, [m])
        assert together.first[d] == pytest.approx(alone.first[0], rel=1e-9) or together.first[d] == alone.first[0]
        assert together.refine(d) == pytest.approx(alone.refine(0), rel=1e-9) or together.refine(d) == alone.refine(0)


def test_the_coupled_example_plans_inside_one_region_and_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv("SPOTFLEET_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("SPOTFLEET_LOCAL_CLOUD", raising=False)
    runner = CliRunner()
    result = runner.invoke(cli, ["plan", str(COUPLED_EXAMPLE), "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    p = Plan.from_json(result.output)
    regions = {f"{a.offer.pool.provider}/{a.offer.pool.region}" for a in p.allocations}
    assert p.feasible and len(regions) == 1
    data = json.loads(result.output)["placement"]
    assert data["level"] == "region" and data["domain"] in regions
    assert data["runner_up"] and data["runner_up_objective"] >= data["objective"]
    assert data["domains"] >= data["solved"] >= 2
    table = runner.invoke(cli, ["plan", str(COUPLED_EXAMPLE)], catch_exceptions=False).output
    assert f"placement       one region: {data['domain']}" in table and f"next best       {data['runner_up']}" in table


def test_a_zone_level_coupled_plan_asks_for_the_providers_interconnect():
    spec = load_spec(COUPLED_EXAMPLE).model_copy(update={"placement": Placement.ZONE})
    p = plan(spec, filter_for_spec(snapshot_offers(), spec))
    zones = {domain_of(a.offer, "zone") for a in p.allocations}
    assert len(zones) == 1 and p.placement.level == "zone"
    provider = next(iter(zones)).split("/")[0]
    assert p.placement.interconnect == placement.INTERCONNECT.get(provider, "")
    assert any("max_zone_share 0.5 does not apply under placement zone" in n for n in p.notes)
    if p.placement.interconnect:  # `fleet plan` says that `fleet up` makes it, not that it is wanted
        shown = "\n".join(placement_lines(p))
        assert f"`fleet up` creates the {p.placement.interconnect} these nodes share" in shown


def test_independent_work_is_not_placed_unless_asked():
    offers = [offer(region=r, zone=f"{r}a", itype=f"t{r}", price=1.0) for r in ("r1", "r2")]
    spread = plan(spec_of(None, kind="independent", gpus=2), offers)
    assert spread.placement is None and len({a.offer.pool.region for a in spread.allocations}) == 2
    placed = plan(spec_of("region", kind="independent", gpus=2), offers)
    assert placed.placement is not None and len({a.offer.pool.region for a in placed.allocations}) == 1


@pytest.mark.parametrize(
    "level,field", [("region", "max_region_share"), ("zone", "max_zone_share"), ("region", "max_provider_share")]
)
def test_a_cap_that_cannot_hold_under_the_placement_is_a_spec_error(level, field):
    text = (
        f"name: xy\ncapacity: {{gpus: 8, accelerators: [H100]}}\nplacement: {level}\n"
        f"diversification: {{{field}: 0.5}}\n"
    )
    with pytest.raises(SpecError, match=rf"diversification.{field} 0.5 cannot hold with placement {level}"):
        parse_spec(text)
    parse_spec(text.replace(f"placement: {level}", "placement: any"))


def test_no_domain_meets_the_spec_gives_the_roomiest_partial_plan():
    offers = [offer(region=r, zone=f"{r}a", itype="t", gpus=4, hint=1, price=4.0) for r in ("r1", "r2")]
    p = plan(spec_of("region", gpus=8), offers)
    assert not p.feasible and p.shortfall.startswith("no single region can meet the spec")
    assert {a.offer.pool.region for a in p.allocations} == {"r1"}
    assert np.isclose(p.totals.weighted_gpus, 4)


def test_a_spec_without_placement_keeps_its_hash():
    """Setting no placement leaves a spec's hash alone; naming one changes it. (The pinned value moved
    once, from 802b0c94f704ecb8, when each provider got its own settings model and OCI joined the
    providers a spec allows by default: both change what the spec means.)"""
    text = "name: xy\ncapacity: {gpus: 8, accelerators: [H100]}\n"
    assert parse_spec(text).spec_hash() == "b07e6b344495af9b"
    assert parse_spec(text + "placement: any\n").spec_hash() != "b07e6b344495af9b"
