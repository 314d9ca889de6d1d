"""Plan against bill through the CLI: what the providers charge is read back after ``fleet up``,
shown beside the plan by ``fleet status``/``history`` (both faces), and held to the budget by
``fleet rebalance`` (``budget.cap_action`` warn | replace | destroy), against the fake Vast server
(a bid that came up on-demand, a host that repriced) and moto behind the EC2 proxy (a spot price
that moved between the plan and the launch)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))
from cli.api_world import ApiWorld  # noqa: E402
from vast_server import API_KEY, VastServer  # noqa: E402

#: Six one-GPU H100 machines; a plan of four uses the cheapest four.
ASKS = [
    {
        "id": 4000 + n,
        "machine_id": 900 + n,
        "num_gpus": 1,
        "gpu_name": "H100 SXM",
        "gpu_ram": 81559,
        "dph_base": 2.0 + 0.05 * n,
        "min_bid": 1.0 + 0.02 * n,
        "reliability2": 0.99,
        "geolocation": ["Texas, US", "Quebec, CA", "Oregon, US"][n % 3],
    }
    for n in range(6)
]

SPEC = """
name: vb
backend: cloud
capacity:
  gpus: 4
  accelerators: [H100]
  gpus_per_node: {{min: 1, max: 1}}
providers:
  vast: {{min_reliability: 0.9}}
diversification:
  max_pool_share: 0.25
budget: {budget}
node:
  spotfleet: preinstalled
"""


class BillWorld(ApiWorld):
    def __init__(self, root: Path, server: VastServer, budget: str = "{}"):
        super().__init__(
            root,
            server.url,
            spec=SPEC.format(budget=budget),
            name="vb",
            strip=("VAST_",),
            env_vars={"SPOTFLEET_VAST_URL": server.url, "VAST_API_KEY": API_KEY},
        )
        self.control("reset", {"asks": ASKS})

    def ours(self) -> dict[str, dict]:
        return {
            str(i["id"]): i
            for i in self.control("instances")["instances"]
            if str(i["label"] or "").startswith("spotfleet|vb|") and not i["destroyed"]
        }


@pytest.fixture(scope="module")
def server():
    srv = VastServer(port=0).start()
    yield srv
    srv.stop()


def test_status_and_history_show_planned_against_billed_read_back_after_up(tmp_path, server):
    world = BillWorld(tmp_path, server)
    world.control("asks/4001", {"bill_markup": 0.05})  # under the 10% tolerance
    world.fleet_json("up", str(world.spec), "--yes")
    status = world.fleet_json("status", "vb")
    bill = status["bill"]
    rows = world.ours()
    assert bill["instances"] == bill["read"] == 4 and bill["breaches"] == []
    for inst in status["instances"]:
        assert inst["billed_per_hour"] == pytest.approx(rows[inst["id"]]["dph_total"])  # Vast's dph_total
        assert (inst["billed_source"], inst["rental"]) == ("instance", "bid")
    assert bill["billed_per_hour"] == pytest.approx(sum(r["dph_total"] for r in rows.values()))
    assert bill["planned_per_hour"] == pytest.approx(sum(i["planned_per_hour"] for i in status["instances"]))
    assert bill["billed_per_hour"] - bill["planned_per_hour"] == pytest.approx(0.05, abs=1e-4)
    assert status["billed_per_hour"] == bill["billed_per_hour"]
    assert status["cost_basis"] == "billed"  # every instance read: cost so far at what Vast bills
    assert status["cost"]["cost_so_far"] >= status["planned_cost_so_far"] > 0
    text = world.fleet("status", "vb").stdout
    assert "billed" in text and "for 4 of 4 instance(s)" in text and "over budget" not in text
    history = world.fleet_json("history", "vb")
    assert {i["id"]: i["billed_per_hour"] for i in history["instances"]} == {
        i["id"]: i["billed_per_hour"] for i in status["instances"]
    }
    listed = world.fleet_json("status")
    assert listed[0]["billed_per_hour"] == pytest.approx(bill["billed_per_hour"]) and listed[0]["bill_read"] == 4
    assert listed[0]["cost_basis"] == "billed"


def test_a_bid_that_came_up_on_demand_is_caught_and_destroyed_and_replaced(tmp_path, server):
    world = BillWorld(tmp_path, server, "{cap_action: destroy}")
    world.control("asks/4000", {"drops_bid": True})  # the cheapest machine ignores the bid
    world.fleet_json("up", str(world.spec), "--yes")
    [victim] = [iid for iid, row in world.ours().items() if not row["is_bid"]]
    status = world.fleet_json("status", "vb")
    [breach] = status["bill"]["breaches"]
    assert (breach["instance_id"], breach["why"], breach["rental"]) == (victim, "rental-mismatch", "on-demand")
    assert "over budget" in world.fleet("status", "vb").stdout
    report = world.fleet_json("rebalance", "vb")
    assert [b["instance_id"] for b in report["bill_breaches"]] == [victim]
    done = [r for r in report["results"] if r["kind"] == "terminate" and r["reason"] == "over-bill"]
    assert [(r["instance"], r["done"]) for r in done] == [(victim, True)]
    ours = world.ours()
    assert victim not in ours and len(ours) == 4 and all(r["is_bid"] for r in ours.values())
    history = world.fleet_json("history", "vb")
    assert [e["instance_id"] for e in history["events"] if e["kind"] == "bill-over-plan"] == [victim]
    assert world.fleet_json("status", "vb")["bill"]["breaches"] == []


def test_replace_launches_first_then_terminates_an_instance_over_its_plan(tmp_path, server):
    world = BillWorld(tmp_path, server, "{cap_action: replace, bill_tolerance: 0.05}")
    world.control("asks/4002", {"bill_markup": 0.4})  # about +35% on a ~$1.15/h bid
    world.fleet_json("up", str(world.spec), "--yes")
    [victim] = [iid for iid, row in world.ours().items() if row["ask"] == 4002]
    first = world.fleet_json("rebalance", "vb")
    assert [b["why"] for b in first["bill_breaches"]] == ["over-plan"]
    assert any(r["kind"] == "launch" and r["done"] for r in first["results"])
    assert victim in world.ours() and len(world.ours()) == 5  # made before broken
    second = world.fleet_json("rebalance", "vb")
    assert [(r["instance"], r["reason"], r["done"]) for r in second["results"] if r["kind"] == "terminate"] == [
        (victim, "over-bill", True)
    ]
    assert victim not in world.ours() and len(world.ours()) == 4


def test_warn_records_the_breach_once_and_touches_nothing(tmp_path, server):
    world = BillWorld(tmp_path, server, "{max_per_node: 1.1}")  # a hard cap under some bids
    world.fleet_json("up", str(world.spec), "--yes")
    before = set(world.ours())
    over = {iid for iid, row in world.ours().items() if row["dph_total"] > 1.1}
    assert over
    for _ in range(2):
        report = world.fleet_json("rebalance", "vb")
        assert {b["instance_id"] for b in report["bill_breaches"]} == over
        assert {b["why"] for b in report["bill_breaches"]} == {"over-cap"}
    assert set(world.ours()) == before
    events = [e for e in world.fleet_json("history", "vb")["events"] if e["kind"] == "bill-over-plan"]
    assert sorted(e["instance_id"] for e in events) == sorted(over)  # once each, not every pass
    assert "warned only" in world.fleet("status", "vb").stdout


@pytest.mark.parametrize(
    "budget, field, fix",
    [
        ("{cap_action: kill}", "budget.cap_action", "'warn', 'replace' or 'destroy'"),
        ("{bill_tolerance: -0.1}", "budget.bill_tolerance", "greater than or equal to 0"),
        ("{max_per_node: 0}", "budget.max_per_node", "greater than 0"),
    ],
)
def test_a_bad_budget_names_the_field_and_the_fix(tmp_path, server, budget, field, fix):
    world = BillWorld(tmp_path, server, budget)
    proc = world.fleet("plan", str(world.spec))
    assert proc.returncode != 0 and field in proc.stderr and fix in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


# ---- EC2 (moto behind the EC2 proxy) -----------------------------------------------------


def test_an_ec2_spot_price_that_moved_after_the_plan_bills_over_it_and_is_warned(tmp_path):
    import aws_world
    from cli.aws_cli_world import PRICES, AwsCli

    world = aws_world.fresh()
    world.proxy.prices(PRICES, default=5.0)
    cli = AwsCli(tmp_path, world)
    spec = cli.spec("awsbill")
    saved = tmp_path / "plan.json"
    assert cli.fleet("plan", spec, "--out", str(saved)).returncode == 0
    world.proxy.prices({"g4dn.xlarge us-east-1b": 0.30})  # the zone's spot price rose by half since
    assert cli.fleet_json("up", str(saved), "--yes")["ok"]
    status = cli.fleet_json("status", "awsbill")
    by_zone: dict[str, set] = {}
    for inst in status["instances"]:
        assert (inst["billed_source"], inst["rental"]) == ("spot-history", "spot")
        by_zone.setdefault(inst["pool"].split("/")[2], set()).add((inst["planned_per_hour"], inst["billed_per_hour"]))
    assert by_zone == {"use1-az1": {(0.20, 0.30)}, "use1-az2": {(0.21, 0.21)}}  # 1b is use1-az1 on moto
    over = {i["id"] for i in status["instances"] if i["pool"].split("/")[2] == "use1-az1"}
    assert {(b["instance_id"], b["why"]) for b in status["bill"]["breaches"]} == {(i, "over-plan") for i in over}
    assert status["bill"]["ratio"] == pytest.approx((0.30 * 2 + 0.21 * 2) / (0.20 * 2 + 0.21 * 2))
    assert "over budget" in cli.fleet("status", "awsbill").stdout
    assert cli.fleet("down", "awsbill", "--yes").returncode == 0
