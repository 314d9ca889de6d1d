"""The GCP adapter against the fake Compute Engine server, beyond the shared contract:
what the VM asks GCE for, offers, operation errors, preemption times, bulk vs single inserts,
the checkpoint bucket, and ``fleet check``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fakes.gce_server import GceServer, control  # noqa: E402

from fleet.errors import FleetError, QuotaExceededError  # noqa: E402
from fleet.model import TAG_FLEET, InstanceState, LaunchRequest, Market, NodeConfig, fleet_tags  # noqa: E402
from fleet.provisioning.reconcile import observe  # noqa: E402
from providers.base import OfferQuery, StorageSpec  # noqa: E402
from providers.gcp import errors  # noqa: E402
from providers.gcp.instances import parse_time  # noqa: E402
from providers.gcp.offers import parse_instance_type  # noqa: E402
from providers.gcp.provider import GceApi, GcpProvider, resolve_project  # noqa: E402
from providers.gcp.settings import GcpSettings  # noqa: E402
from providers.gcp.storage import _settle  # noqa: E402

FLEET_BIN = str(Path(sys.executable).with_name("fleet"))


@pytest.fixture(scope="module")
def server():
    s = GceServer().start()
    yield s
    s.stop()


@pytest.fixture
def gcp(server) -> GcpProvider:
    control(server.url, "reset", {})
    return GcpProvider("proj", api=GceApi("proj", endpoint=server.url, retry_delays=(0.01, 0.02)))


def _offer(gcp: GcpProvider, instance_type: str, market: Market = Market.SPOT, zone: str = "us-central1-a"):
    return next(
        o
        for o in gcp.list_offers(OfferQuery())
        if o.pool.instance_type == instance_type and o.market is market and o.pool.zone == zone
    )


def _launch(gcp: GcpProvider, offer, count: int, token: str, **extra):
    return gcp.launch(
        LaunchRequest(
            fleet="alpha", offer=offer, count=count, token=token, tags=fleet_tags("alpha", offer.pool, "plan1"), **extra
        )
    )


def _vms(server) -> dict[str, dict]:
    return {i["name"]: i for i in control(server.url, "instances")["instances"]}


# ---- offers ----------------------------------------------------------------------------


def test_offers_cover_gpu_families_and_attachable_gpus_only_on_n1(gcp):
    offers = gcp.list_offers(OfferQuery())
    kinds = {o.pool.instance_type for o in offers}
    assert {"a2-highgpu-1g", "a3-highgpu-8g", "g2-standard-4"} <= kinds
    assert "n1-standard-4+nvidia-tesla-t4x1" in kinds and "n1-standard-32+nvidia-tesla-v100x8" in kinds
    assert not any(k.startswith("e2-") or k.startswith("n1-standard-") and "+" not in k for k in kinds)
    assert not any("t4x8" in k for k in kinds), "T4 takes at most 4 cards per VM"
    h100 = next(o for o in offers if o.pool.instance_type == "a3-highgpu-8g" and o.market is Market.SPOT)
    assert h100.accelerator == "H100" and h100.gpus == 8 and h100.vcpus == 208
    assert all(o.source.startswith("gce-api+snapshot-") for o in offers)
    # us-east1-d has only T4s: it offers nothing else
    assert {o.accelerator for o in offers if o.pool.zone == "us-east1-d"} == {"T4"}


def test_n1_price_is_the_gpu_rows_plus_the_host(gcp):
    t4 = _offer(gcp, "n1-standard-4+nvidia-tesla-t4x1", Market.ON_DEMAND)
    a2 = _offer(gcp, "a2-highgpu-1g", Market.ON_DEMAND)
    assert t4.price_per_hour > 0.35  # the snapshot's T4 card alone is $0.35/h in us-central1
    assert t4.price_per_hour < a2.price_per_hour
    spot = _offer(gcp, "n1-standard-4+nvidia-tesla-t4x1")
    assert spot.price_per_hour < t4.price_per_hour and spot.on_demand_price == t4.price_per_hour
    assert spot.interruptions_per_hour > 0


def test_billing_catalog_prices_are_composed_per_machine_and_cached(server, gcp, monkeypatch, tmp_path):
    monkeypatch.setenv("SPOTFLEET_GCP_BILLING_ENDPOINT", server.url)
    monkeypatch.setenv("SPOTFLEET_HOME", str(tmp_path))
    t4 = _offer(gcp, "n1-standard-4+nvidia-tesla-t4x1")
    assert t4.source == "gce-api+billing"
    # n1-standard-4 (4 vCPUs, 15 GiB) + one T4, Spot rates of the fake catalog
    assert t4.price_per_hour == pytest.approx(4 * 0.00663 + 15 * 0.000889 + 0.14, abs=1e-5)
    a3 = _offer(gcp, "a3-highgpu-8g", Market.ON_DEMAND)
    assert a3.price_per_hour == pytest.approx(208 * 0.0291 + 1872 * 0.0039 + 8 * 9.79629, abs=1e-4)
    GcpProvider("proj", api=gcp.api).list_offers(OfferQuery())
    assert control(server.url, "stats")["billing.skus"] == 1, "the second listing reads the disk cache"
    assert list((tmp_path / "cache").glob("gcp-billing-*.json"))


def test_an_unreadable_billing_catalog_falls_back_to_the_snapshot(server, gcp, monkeypatch, tmp_path):
    monkeypatch.setenv("SPOTFLEET_GCP_BILLING_ENDPOINT", server.url)
    monkeypatch.setenv("SPOTFLEET_HOME", str(tmp_path))
    control(server.url, "billing", {"down": True})
    offers = gcp.list_offers(OfferQuery())
    assert offers and all(o.source.startswith("gce-api+snapshot-") for o in offers)
    assert not (tmp_path / "cache").exists()


def test_parse_skus_keeps_machine_parts_and_gpus_only():
    from providers.gcp.pricing import parse_skus

    def sku(description, usage, price, regions=("us-central1",), family="Compute"):
        units, nanos = int(price), round((price - int(price)) * 1e9)
        return {
            "description": description,
            "serviceRegions": list(regions),
            "category": {"resourceFamily": family, "usageType": usage},
            "pricingInfo": [
                {
                    "pricingExpression": {
                        "tieredRates": [{"startUsageAmount": 0, "unitPrice": {"units": str(units), "nanos": nanos}}]
                    }
                }
            ],
        }

    table = parse_skus(
        [
            sku("G2 Instance Core running in Americas", "OnDemand", 0.024988),
            sku("Spot Preemptible G2 Instance Ram running in Americas", "Preemptible", 0.00116),
            sku("Nvidia L4 GPU running in Americas", "OnDemand", 0.56004),
            sku("Commitment v1: Nvidia L4 GPU running in Americas", "Commit1Yr", 0.3),
            sku("Nvidia L4 GPU running in Americas", "OnDemand", 0.1, family="Storage"),
        ]
    )
    assert table.units == {
        ("us-central1", "g2:core", Market.ON_DEMAND): pytest.approx(0.024988),
        ("us-central1", "g2:ram", Market.SPOT): pytest.approx(0.00116),
        ("us-central1", "nvidia-l4", Market.ON_DEMAND): pytest.approx(0.56004),
    }
    assert table.price("us-central1", Market.SPOT, "g2-standard-4", 4, 16, "nvidia-l4", 1) is None


def test_capacity_hints_are_the_regions_free_gpu_quota(server, gcp):
    control(server.url, "quota", {"region": "us-central1", "metric": "PREEMPTIBLE_NVIDIA_T4_GPUS", "limit": 5})
    hints = {(o.pool.zone, o.pool.instance_type, o.market): o.capacity_hint for o in gcp.list_offers(OfferQuery())}
    assert hints[("us-central1-a", "n1-standard-4+nvidia-tesla-t4x1", Market.SPOT)] == 5
    assert hints[("us-central1-b", "n1-standard-8+nvidia-tesla-t4x2", Market.SPOT)] == 2
    assert hints[("us-central1-a", "n1-standard-4+nvidia-tesla-t4x1", Market.ON_DEMAND)] == 512
    assert hints[("us-east1-b", "n1-standard-4+nvidia-tesla-t4x1", Market.SPOT)] == 512
    _launch(gcp, _offer(gcp, "n1-standard-4+nvidia-tesla-t4x1"), 2, "tok-quota-use")
    assert _offer(gcp, "n1-standard-4+nvidia-tesla-t4x1", zone="us-central1-c").capacity_hint == 3


def test_parse_instance_type_round_trips_n1_shapes():
    assert parse_instance_type("n1-standard-8+nvidia-tesla-v100x2") == ("n1-standard-8", "nvidia-tesla-v100", 2)
    assert parse_instance_type("a2-highgpu-1g") == ("a2-highgpu-1g", "", 0)


# ---- what a launch asks GCE for ----------------------------------------------------------------


def test_spot_vm_carries_scheduling_labels_and_bootstrap(server, gcp):
    offer = _offer(gcp, "n1-standard-4+nvidia-tesla-t4x1")
    node = NodeConfig(startup="python train.py", checkpoint_uri="gs://b/alpha")
    result = _launch(gcp, offer, 2, "tok-body", node=node)
    assert len(result.instances) == 2
    vm = _vms(server)[result.instances[0].id.split("/")[1]]
    assert vm["scheduling"] == {
        "provisioningModel": "SPOT",
        "instanceTerminationAction": "DELETE",
        "onHostMaintenance": "TERMINATE",
        "automaticRestart": False,
    }
    assert vm["guestAccelerators"][0]["acceleratorType"].endswith("/nvidia-tesla-t4")
    assert vm["labels"]["spotfleet-fleet"] == "alpha" and vm["labels"]["spotfleet-plan"] == "plan1"
    assert vm["labels"]["spotfleet-pool"] == offer.pool.short_hash and vm["labels"]["spotfleet-token"]
    meta = {i["key"]: i["value"] for i in vm["metadata"]["items"]}
    assert "SPOTFLEET_CHECKPOINT_URI=gs://b/alpha" in meta["startup-script"]
    assert "--cloud gcp" in meta["startup-script"] and "python train.py" in meta["startup-script"]
    assert json.loads(meta["spotfleet-tags"])[TAG_FLEET] == "alpha"
    assert vm["id"].isdigit()


def test_on_demand_vm_is_standard_and_restarts(server, gcp):
    offer = _offer(gcp, "a2-highgpu-1g", Market.ON_DEMAND)
    inst = _launch(gcp, offer, 1, "tok-od").instances[0]
    vm = _vms(server)[inst.id.split("/")[1]]
    assert vm["scheduling"] == {
        "provisioningModel": "STANDARD",
        "onHostMaintenance": "TERMINATE",
        "automaticRestart": True,
    }
    assert vm["guestAccelerators"] == [] and vm["machineType"].endswith("/a2-highgpu-1g")


@pytest.mark.parametrize("bulk", [True, False])
def test_bulk_and_single_inserts_make_the_same_fleet(server, gcp, bulk):
    gcp.bulk = bulk
    offer = _offer(gcp, "g2-standard-4")
    result = _launch(gcp, offer, 5, f"tok-{bulk}")
    assert len(result.instances) == 5 and not result.error_kind
    stats = control(server.url, "stats")
    assert stats.get("instances.bulkInsert", 0) == (1 if bulk else 0)
    assert stats.get("instances.insert", 0) == (0 if bulk else 5)
    again = _launch(gcp, offer, 5, f"tok-{bulk}")
    assert [i.id for i in again.instances] == [i.id for i in result.instances]
    assert len(_vms(server)) == 5


def test_single_inserts_keep_a_partial_fill(server, gcp):
    gcp.bulk = False
    offer = _offer(gcp, "g2-standard-4")
    control(server.url, "capacity", {"zone": offer.pool.zone, "machineType": "g2-standard-4", "count": 3})
    result = _launch(gcp, offer, 5, "tok-partial-single")
    assert len(result.instances) == 3
    assert result.error_kind == "capacity" and result.error_code == "ZONE_RESOURCE_POOL_EXHAUSTED"


def test_a_quota_failed_operation_raises_quota_with_the_metric(server, gcp):
    offer = _offer(gcp, "a3-highgpu-8g")
    control(server.url, "quota", {"region": "us-central1", "metric": "PREEMPTIBLE_NVIDIA_H100_GPUS", "limit": 8})
    assert len(_launch(gcp, offer, 1, "tok-q1").instances) == 1
    with pytest.raises(QuotaExceededError) as err:
        _launch(gcp, offer, 1, "tok-q2")
    assert err.value.code == "QUOTA_EXCEEDED" and "PREEMPTIBLE_NVIDIA_H100_GPUS" in str(err.value)
    assert err.value.region == "us-central1"


def test_operation_errors_prefer_the_cause_over_min_count():
    err = errors.from_operation(
        [("VM_MIN_COUNT_NOT_REACHED", "min count"), ("ZONE_RESOURCE_POOL_EXHAUSTED", "no room")], region="us-central1"
    )
    assert err.code == "ZONE_RESOURCE_POOL_EXHAUSTED" and errors.kind_of(err) == "capacity"
    assert "min count" in err.message and "no room" in err.message
    assert isinstance(
        errors.from_operation([("QUOTA_EXCEEDED", "Quota 'GPUS_ALL_REGIONS' exceeded")]), QuotaExceededError
    )
    assert type(errors.to_error("", "x", status=503)).__name__ == "TransientProviderError"


# ---- preemption ------------------------------------------------------------------------------


def test_a_stopped_preempted_vm_is_reported_at_gces_time(server, gcp):
    gcp.termination_action = "STOP"
    offer = _offer(gcp, "g2-standard-4")
    inst = _launch(gcp, offer, 2, "tok-stop").instances[0]
    zone, name = inst.id.split("/")
    control(server.url, "preempt", {"zone": zone, "name": name})
    stamp = _vms(server)[name]["lastStopTimestamp"]
    listed = {i.id: i for i in gcp.list_instances("alpha")}
    assert listed[inst.id].state is InstanceState.PREEMPTED
    assert listed[inst.id].ended_at == pytest.approx(parse_time(stamp), abs=1e-3)
    obs = observe({"gcp": gcp}, "alpha")
    assert len(obs.instances) == 1 and obs.ended[inst.id] == listed[inst.id].ended_at


def test_a_deleted_preempted_vm_is_reported_from_the_preemption_operation(server, gcp):
    offer = _offer(gcp, "g2-standard-4")
    inst = _launch(gcp, offer, 2, "tok-del").instances[0]
    zone, name = inst.id.split("/")
    op = control(server.url, "preempt", {"zone": zone, "name": name})
    assert name not in _vms(server)
    listed = {i.id: i for i in gcp.list_instances("alpha")}
    assert listed[inst.id].state is InstanceState.PREEMPTED and listed[inst.id].ended_at is not None
    assert op["operationType"] == "compute.instances.preempted"
    assert sum(1 for i in listed.values() if i.state.alive) == 1
    assert gcp.list_instances("beta") == []


# ---- storage -----------------------------------------------------------------------------------


def test_bucket_settings_are_set_once():
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    client = storage.Client(project="p", credentials=AnonymousCredentials())
    bucket = client.bucket("alpha-checkpoints")
    spec = StorageSpec(provider="gcp", bucket="alpha-checkpoints", expire_days=7)
    assert _settle(bucket, spec) is True
    assert bucket.iam_configuration.uniform_bucket_level_access_enabled
    assert bucket.iam_configuration.public_access_prevention == "enforced"
    assert bucket.labels == {"managed-by": "spotfleet"}
    assert [dict(r) for r in bucket.lifecycle_rules] == [{"action": {"type": "Delete"}, "condition": {"age": 7}}]
    assert _settle(bucket, spec) is False  # nothing left to change: no patch on a rerun


# ---- project and fleet check -------------------------------------------------------------------


def test_project_comes_from_the_spec_then_the_environment(monkeypatch):
    monkeypatch.setenv("SPOTFLEET_GCE_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT", raising=False)
    monkeypatch.delenv("CLOUDSDK_CORE_PROJECT", raising=False)
    assert resolve_project(GcpSettings(project="from-spec")) == "from-spec"
    with pytest.raises(FleetError) as err:
        resolve_project(GcpSettings())
    assert "providers.gcp.project" in str(err.value) and "GOOGLE_CLOUD_PROJECT" in str(err.value)
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "from-env")
    assert resolve_project(GcpSettings()) == "from-env"


def _check(server, tmp_path, *args, **env):
    base = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "CLOUDSDK_"))}
    base.update(SPOTFLEET_HOME=str(tmp_path), SPOTFLEET_GCE_ENDPOINT=server.url, **env)
    return subprocess.run(
        [FLEET_BIN, "check", "gcp", "--json", *args], env=base, capture_output=True, text=True, timeout=120
    )


def test_fleet_check_reports_project_and_gpu_quotas(server, tmp_path):
    control(server.url, "reset", {})
    control(server.url, "quota", {"region": "us-east4", "metric": "NVIDIA_H100_GPUS", "limit": 16})
    proc = _check(server, tmp_path, GOOGLE_CLOUD_PROJECT="proj")
    assert proc.returncode == 0, proc.stderr
    (result,) = json.loads(proc.stdout)
    assert result["ok"] and result["identity"].startswith("project proj") and result["can_launch"]
    assert result["quotas"]["NVIDIA_H100_GPUS us-east4"] == "0 of 16 used"
    assert "PREEMPTIBLE_NVIDIA_T4_GPUS us-central1" in result["quotas"]


def test_fleet_check_reads_the_quotas_of_the_specs_regions(server, tmp_path):
    control(server.url, "reset", {})
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "name: quotas\nbackend: cloud\ncapacity: {gpus: 8, accelerators: [H100]}\n"
        "providers:\n  gcp: {project: spec-proj, regions: [us-east4]}\n"
    )
    proc = _check(server, tmp_path, "--spec", str(spec))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (result,) = json.loads(proc.stdout)
    assert result["identity"].startswith("project spec-proj")
    assert {k.split()[1] for k in result["quotas"]} == {"us-east4"}
    assert result["quotas"]["PREEMPTIBLE_NVIDIA_H100_GPUS us-east4"] == "0 of 512 used"


def test_fleet_check_without_a_project_names_the_fix(server, tmp_path):
    proc = _check(server, tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    (result,) = json.loads(proc.stdout)
    assert not result["ok"] and "GOOGLE_CLOUD_PROJECT" in result["detail"] and result["fix"]


def test_the_fake_runs_on_its_own(tmp_path):
    from fakes.storage_emulators import free_port

    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve().parents[1] / "fakes" / "gce_server.py"), "--port", str(port)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert f"127.0.0.1:{port}" in proc.stdout.readline()
        url = f"http://127.0.0.1:{port}"
        gcp = GcpProvider("solo", api=GceApi("solo", endpoint=url))
        assert any(o.accelerator == "H100" for o in gcp.list_offers(OfferQuery(accelerators=("H100",))))
        assert control(url, "stats") == {
            "machineTypes.aggregatedList": 1,
            "acceleratorTypes.aggregatedList": 1,
            "regions.list": 1,
        }
    finally:
        proc.terminate()
        proc.wait(timeout=10)


# ---- compact placement (LaunchRequest.interconnect) ---------------------------------------


def test_an_interconnect_launch_puts_every_vm_under_one_compact_policy(gcp, server):
    from fleet.model import interconnect_group

    offer = _offer(gcp, "a2-highgpu-1g")
    name = interconnect_group("alpha", "gcp/us-central1/us-central1-a")
    _launch(gcp, offer, 2, "tok-cp-1", interconnect=name)  # bulkInsert: bare policy names
    _launch(gcp, offer, 1, "tok-cp-2", interconnect=name)  # insert: the policy's URL
    policy = control(server.url, "policies")[f"us-central1/{name}"]
    assert (
        policy["groupPlacementPolicy"] == {"collocation": "COLLOCATED"}
        and "vmCount" not in policy["groupPlacementPolicy"]
    )
    assert len(policy["users"]) == 3
    assert all(
        vm["resourcePolicies"][0].endswith(f"/regions/us-central1/resourcePolicies/{name}")
        for vm in _vms(server).values()
    )
    with pytest.raises(FleetError, match="resourceInUse|already being used"):
        gcp.teardown("alpha")  # GCE refuses while VMs use it
    gcp.terminate([i.id for i in gcp.list_instances("alpha")])
    assert gcp.teardown("alpha") == [name] and gcp.teardown("alpha") == []


def test_the_fake_refuses_a_compact_policy_across_zones_or_past_its_vm_count(server):
    """What GCE answers (use-compact-placement-policies): one zone per compact policy, and no more
    VMs than its ``vmCount``; driven by the real client, so the refusals are the wire format's."""
    from google.api_core import exceptions as gexc
    from google.api_core.client_options import ClientOptions
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import compute_v1 as c

    control(server.url, "reset", {})
    kw = dict(
        transport="rest", client_options=ClientOptions(api_endpoint=server.url), credentials=AnonymousCredentials()
    )
    policies, vms = c.ResourcePoliciesClient(**kw), c.InstancesClient(**kw)
    policies.insert(
        project="p",
        region="us-central1",
        resource_policy_resource=c.ResourcePolicy(
            name="two",
            group_placement_policy=c.ResourcePolicyGroupPlacementPolicy(collocation="COLLOCATED", vm_count=2),
        ),
    )
    link = "projects/p/regions/us-central1/resourcePolicies/two"

    def vm(name: str, zone: str, policy: str = link) -> None:
        vms.insert(
            project="p",
            zone=zone,
            instance_resource=c.Instance(
                name=name,
                machine_type=f"zones/{zone}/machineTypes/a2-highgpu-1g",
                resource_policies=[policy],
                scheduling=c.Scheduling(on_host_maintenance="TERMINATE"),
            ),
        )

    vm("a", "us-central1-a")
    with pytest.raises(gexc.BadRequest, match="zone us-central1-a"):
        vm("b", "us-central1-c")  # the policy holds us-central1-a now
    vm("c", "us-central1-a")
    with pytest.raises(gexc.BadRequest, match="at most 2"):
        vm("d", "us-central1-a")
    with pytest.raises(gexc.NotFound):
        vm("e", "us-central1-a", "projects/p/regions/us-central1/resourcePolicies/none")
    with pytest.raises(gexc.BadRequest, match="same region"):
        vm("f", "us-east1-c")
    assert sorted(control(server.url, "policies")["us-central1/two"]["users"]) == ["us-central1-a/a", "us-central1-a/c"]
