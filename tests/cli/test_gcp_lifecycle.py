"""`fleet up` on `backend: cloud` with only GCP enabled, as real subprocesses against the fake
Compute Engine server and fake-gcs-server: what only GCP has (zones out of capacity re-planned
around, a spec without a project). Its world is tests/cli/gcp_world.py; the lifecycle every
provider shares (up, rerun, kill -9 mid-up, down) is tests/cli/test_provider_lifecycle.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cli.gcp_world import SPEC, GcpWorld  # noqa: E402
from fakes.gce_server import GceServer, control  # noqa: E402


@pytest.fixture
def cloud(tmp_path: Path, gce: GceServer, gcs) -> GcpWorld:
    return GcpWorld(tmp_path, gce, gcs)


def test_zones_out_of_capacity_are_planned_around(cloud: GcpWorld):
    cloud.spec.write_text(
        SPEC.replace("{min_pools: 3, max_pool_share: 0.34}", "{min_pools: 2, max_pool_share: 0.5, max_zone_share: 1.0}")
    )
    control(cloud.url, "capacity", {"zone": "us-central1-a", "count": 0})
    control(cloud.url, "capacity", {"zone": "us-central1-b", "count": 0})
    proc = cloud.fleet("up", str(cloud.spec), "--yes", "--json")
    report = json.loads(proc.stdout)
    assert proc.returncode == 0 and report["ok"], proc.stdout
    failed = {f["pool"].split("/")[2] for f in report["failures"] if f["error_kind"] == "capacity"}
    assert failed and failed <= {"us-central1-a", "us-central1-b"}, "the first plan must have hit a full zone"
    assert all(f["error_code"] == "ZONE_RESOURCE_POOL_EXHAUSTED" for f in report["failures"])
    assert set(cloud.zones()) <= {"us-central1-c", "us-central1-f"}
    assert sum(cloud.zones().values()) == 6 == len(cloud.ours(live=False))


def test_without_a_project_up_fails_in_one_line(cloud: GcpWorld):
    cloud.spec.write_text(SPEC.replace("{project: spec-project, ", "{"))
    proc = cloud.fleet("up", str(cloud.spec), "--yes")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "GOOGLE_CLOUD_PROJECT" in proc.stderr + proc.stdout
