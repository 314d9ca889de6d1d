"""`fleet up` on `backend: cloud` with only OCI enabled, as a real subprocess against the fake OCI
API (tests/fakes/oci_server.py) through the real ``oci`` SDK: what only OCI has (an availability
domain out of host capacity is planned around). Its world is tests/cli/oci_world.py; the
lifecycle every provider shares (up, rerun, kill -9 mid-up, down) is
tests/cli/test_provider_lifecycle.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cli.oci_world import SPEC, OciWorld  # noqa: E402
from fakes.oci_server import ADS, OciServer  # noqa: E402

pytest.importorskip("oci")


@pytest.fixture
def cloud(tmp_path: Path, oci_server: OciServer) -> OciWorld:
    return OciWorld(tmp_path, oci_server)


def test_an_ad_out_of_host_capacity_is_planned_around(cloud: OciWorld):
    cloud.spec.write_text(
        SPEC.replace(
            "{min_pools: 3, max_pool_share: 0.34, max_zone_share: 0.34}",
            "{min_pools: 2, max_pool_share: 0.5, max_zone_share: 1.0}",
        )
    )
    cloud.control("capacity", {"ad": ADS[0], "shape": "VM.GPU.A10.1", "hosts": 0})
    proc = cloud.fleet("up", str(cloud.spec), "--yes", "--json")
    report = json.loads(proc.stdout)
    assert proc.returncode == 0 and report["ok"], proc.stdout + proc.stderr
    assert set(cloud.zones()) <= {ADS[1], ADS[2]} and sum(cloud.zones().values()) == 6 == len(cloud.ours(live=False))
    assert all(f["error_code"] == "OutOfHostCapacity" for f in report["failures"])
