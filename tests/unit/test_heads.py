"""The head role: spec section, head planning beside the workers, and the head-first stage plan."""

from __future__ import annotations

import json

import pytest

from fleet.bootstrap import boot_for, render
from fleet.catalog import CPU, cpu_offers, filter_for_spec, snapshot_offers
from fleet.errors import PlanError, SpecError
from fleet.model import HEAD, Instance, InstanceState, LaunchRequest, Market, NodeConfig
from fleet.planning import heads
from fleet.planning.planner import plan
from fleet.provisioning.roles import head_node, head_stage, worker_node
from fleet.spec import parse_spec

BASE = "name: roles\ncapacity: {gpus: 16, accelerators: [H100]}\n"


def offers_for(spec):
    return filter_for_spec(snapshot_offers(), spec) + list(cpu_offers())


def test_a_spec_without_head_plans_and_hashes_as_before():
    spec = parse_spec(BASE)
    assert spec.head is None
    assert "head" not in spec.spec_hash() and spec.spec_hash() == parse_spec(BASE).spec_hash()
    p = plan(spec, offers_for(spec))
    assert all(a.role == "worker" for a in p.allocations)
    # the CPU types change nothing for the workers
    assert plan(spec, filter_for_spec(snapshot_offers(), spec)).counts() == p.counts()


def test_bad_head_fields_are_named():
    with pytest.raises(SpecError) as err:
        parse_spec(BASE + "head: {vcpu: 4, gpus: -1, provider: awz}\n")
    text = str(err.value)
    assert "head.vcpu" in text and "did you mean 'vcpus'" in text
    assert "head.gpus" in text and "head.provider" in text
    with pytest.raises(SpecError, match="head.provider 'gcp' is not among the enabled providers"):
        parse_spec(BASE + "providers: [aws]\nhead: {provider: gcp}\n")


def test_head_is_the_cheapest_on_demand_cpu_type_next_to_the_largest_worker_share():
    spec = parse_spec(BASE + "providers: {aws: {regions: [us-east-1]}}\nhead: {vcpus: 4, memory_gib: 16}\n")
    p = plan(spec, offers_for(spec))
    (head,) = p.role_allocations(HEAD)
    o = head.offer
    assert o.market is Market.ON_DEMAND and o.accelerator == CPU and o.vcpus >= 4 and o.memory_gib >= 16
    assert (o.pool.provider, o.pool.region) == heads.anchor(heads.worker_shares(p))
    fitting = [c for c in cpu_offers() if c.pool.region == "us-east-1" and heads.fits(spec.head, c)]
    assert o.price_per_hour == min(c.price_per_hour for c in fitting)
    assert p.totals.price_per_hour == pytest.approx(sum(a.offer.price_per_hour * a.count for a in p.allocations))
    workers = plan(parse_spec(BASE + "providers: {aws: {regions: [us-east-1]}}\n"), offers_for(spec))
    assert {a.offer.pool.id: a.count for a in p.role_allocations("worker")} == workers.counts()


def test_pinned_head_and_widening_say_where_it_went():
    spec = parse_spec(BASE + "head: {provider: gcp, region: europe-west4, count: 2}\n")
    p = plan(spec, offers_for(spec))
    (head,) = p.role_allocations(HEAD)
    assert head.count == 2 and head.offer.pool.region == "europe-west4" and head.offer.gpus == 0
    # workers in a region without a CPU type: the head takes a CPU type elsewhere, not a GPU node
    spec = parse_spec(
        BASE + "providers: {aws: {regions: [ap-south-1, us-east-1]}}\n"
        "diversification: {max_region_share: 1}\nhead: {}\n"
    )
    offers = [o for o in offers_for(spec) if o.accelerator == CPU or o.pool.region == "ap-south-1"]
    p = plan(spec, offers)
    (head,) = p.role_allocations(HEAD)
    assert head.offer.gpus == 0 and head.offer.pool.region == "us-east-1"
    assert any("no CPU-only type meets it in aws/ap-south-1" in n for n in p.notes)


def test_a_gpu_head_and_an_impossible_head():
    spec = parse_spec(BASE + "head: {gpus: 1}\n")
    (head,) = plan(spec, offers_for(spec)).role_allocations(HEAD)
    assert head.offer.gpus >= 1 and head.offer.market is Market.ON_DEMAND
    spec = parse_spec(BASE + "head: {vcpus: 1000}\n")
    with pytest.raises(PlanError, match="no offer meets head .1000 vCPUs"):
        plan(spec, offers_for(spec))


def test_a_replan_keeps_the_running_head():
    spec = parse_spec(BASE + "providers: {aws: {regions: [us-east-1]}}\nhead: {}\n")
    first = plan(spec, offers_for(spec))
    (head,) = first.role_allocations(HEAD)
    other = next(
        o
        for o in cpu_offers()
        if o.pool.region == "us-east-1" and o.pool.id != head.offer.pool.id and heads.fits(spec.head, o)
    )
    running = {a.offer.pool.id: a.count for a in first.role_allocations("worker")}
    again = plan(spec, offers_for(spec), current={**running, other.pool.id: 1})
    assert again.role_allocations(HEAD)[0].offer.pool.id == other.pool.id


def test_head_stage_launches_the_head_only():
    spec = parse_spec(BASE + "providers: {aws: {regions: [us-east-1]}}\nhead: {}\n")
    p = plan(spec, offers_for(spec))
    worker_pool = p.role_allocations("worker")[0].offer.pool.id
    stage = head_stage(p, {worker_pool: 1})
    assert stage.role_allocations(HEAD) == p.role_allocations(HEAD)
    assert {a.offer.pool.id: a.count for a in stage.role_allocations("worker")} == {worker_pool: 1}
    assert head_stage(p, {}).counts() == {p.role_allocations(HEAD)[0].offer.pool.id: 1}


def test_the_node_bootstrap_exports_the_head_address_to_workers():
    spec = parse_spec(BASE + "head: {port: 6379, startup: 'ray start --head --block'}\n")
    p = plan(spec, offers_for(spec))
    head_offer = p.role_allocations(HEAD)[0].offer
    head = Instance(
        id="i-head",
        fleet="roles",
        pool=head_offer.pool,
        state=InstanceState.RUNNING,
        accelerator=CPU,
        gpus=0,
        price_per_hour=head_offer.price_per_hour,
        launched_at=0.0,
        address="10.0.0.5",
    )
    worker = p.role_allocations("worker")[0].offer
    request = LaunchRequest(
        fleet="roles", offer=worker, count=1, token="t", node=worker_node(spec, NodeConfig(startup="train"), head)
    )
    script = render(boot_for("aws", request))
    for line in (
        "export SPOTFLEET_HEAD_ADDR=10.0.0.5",
        "export SPOTFLEET_HEAD_PORT=6379",
        "export SPOTFLEET_ROLE=worker",
    ):
        assert line in script
    head_script = render(
        boot_for(
            "aws", LaunchRequest(fleet="roles", offer=head_offer, count=1, token="h", node=head_node(spec, {}, ""))
        )
    )
    assert "export SPOTFLEET_ROLE=head" in head_script and "SPOTFLEET_HEAD_ADDR" not in head_script
    assert "ray start --head --block" in head_script


def test_fleet_plan_shows_the_head_row_and_roles_in_json(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from fleet.cli.main import cli

    monkeypatch.setenv("SPOTFLEET_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("SPOTFLEET_LOCAL_CLOUD", raising=False)
    path = tmp_path / "fleet.yaml"
    path.write_text(BASE + "providers: {gcp: {}}\nhead: {vcpus: 2}\n")
    table = CliRunner().invoke(cli, ["plan", str(path), "--wide"], catch_exceptions=False)
    assert table.exit_code == 0, table.output
    head_rows = [line for line in table.output.splitlines() if "on-demand (head)" in line]
    assert len(head_rows) == 1 and "e2-medium" in head_rows[0] and "2 vCPU" in head_rows[0]
    data = json.loads(CliRunner().invoke(cli, ["plan", str(path), "--json"], catch_exceptions=False).output)
    roles = [(a["role"], a["offer"]["accelerator"]) for a in data["allocations"]]
    assert roles[0] == ("head", CPU) and {r for r, _ in roles[1:]} == {"worker"}
