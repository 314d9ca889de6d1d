"""Every shipped example goes `fleet up` and `fleet down` on `backend: cloud`, against the fakes of
every provider it enables at once: moto behind the EC2 proxy (AWS, and S3 for checkpoints), the
fake Compute Engine server (with its billing catalog) and fake-gcs-server, the fake ARM server, the
fake Vast, Lambda and RunPod servers. Each example is used as shipped (counts, budget, caps); only what points it at
the fakes changes: `backend: cloud`, moto's AMI, a GCP project, an Azure subscription and group,
and AWS held to three regions where an example names none (every call of every command would
otherwise visit each region of the snapshot in moto). What counts is what the fakes hold: the
planned instances per provider, then none."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))

import aws_world  # noqa: E402
from azure_arm import SUBSCRIPTION, ArmServer  # noqa: E402
from fakes.gce_server import GceServer, control  # noqa: E402
from fakes.storage_emulators import EmulatorUnavailable, in_ci, start_fake_gcs  # noqa: E402
from lambda_server import API_KEY as LAMBDA_KEY  # noqa: E402
from lambda_server import LambdaServer  # noqa: E402
from runpod_server import API_KEY as RUNPOD_KEY  # noqa: E402
from runpod_server import RunPodServer  # noqa: E402
from vast_server import API_KEY, VastServer  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p.stem for p in (ROOT / "examples").glob("*.yaml"))
FLEET_BIN = str(Path(sys.executable).with_name("fleet"))
AWS_REGIONS = ("us-east-1", "us-east-2", "us-west-2")

#: Vast machines of 1 to 8 H100s in four places (on-demand at dph_base, interruptible from min_bid).
ASKS = [
    {
        "id": 5000 + n,
        "machine_id": 900 + n,
        "num_gpus": gpus,
        "gpu_name": "H100 SXM",
        "gpu_ram": 81559,
        "dph_base": 2.0 * gpus + 0.05 * n,
        "min_bid": 1.0 * gpus + 0.02 * n,
        "reliability2": 0.99,
        "geolocation": ["Texas, US", "Quebec, CA", "Oregon, US", "Bavaria, DE"][n % 4],
    }
    for n, gpus in enumerate([1, 2, 4, 8, 8, 8, 1, 2])
]


@pytest.fixture(scope="module")
def fakes():
    try:
        gcs = start_fake_gcs()
    except EmulatorUnavailable as err:
        if in_ci():
            raise
        pytest.skip(str(err))
    servers = [
        GceServer().start(),
        ArmServer(port=0).start(),
        VastServer(port=0).start(),
        LambdaServer(port=0).start(),
        RunPodServer(port=0).start(),
    ]
    try:
        yield {
            "gce": servers[0],
            "arm": servers[1],
            "vast": servers[2],
            "lambda": servers[3],
            "runpod": servers[4],
            "gcs": gcs,
        }
    finally:
        for server in servers:
            server.stop()
        gcs.stop()


class Clouds:
    """The fakes as one world, and the `fleet` command pointed at all of them."""

    def __init__(self, root: Path, fakes: dict[str, Any]):
        self.root, self.f = root, fakes
        self.aws = aws_world.fresh()
        self.aws.proxy.prices({}, default=5.0)
        control(fakes["gce"].url, "reset", {})
        self._post("arm", "reset", {})
        self._post("vast", "reset", {"asks": ASKS})
        self._post("lambda", "reset", {})
        self._post("lambda", "config", {"boot_seconds": 0, "terminate_seconds": 0, "launch_interval": 0})
        self._post("runpod", "reset", {})
        self.env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("SPOTFLEET_", "AWS_", "AZURE_", "VAST_", "GOOGLE_", "CLOUDSDK_", "LAMBDA_", "RUNPOD_"))
        }
        arm = fakes["arm"].url
        self.env.update(
            self.aws.env,
            HOME=str(root),
            SPOTFLEET_HOME=str(root / "home"),
            SPOTFLEET_CACHE_DIR=str(root / "cache"),
            COLUMNS="200",
            NO_COLOR="1",
            SPOTFLEET_GCE_ENDPOINT=fakes["gce"].url,
            SPOTFLEET_GCP_BILLING_ENDPOINT=fakes["gce"].url,
            STORAGE_EMULATOR_HOST=fakes["gcs"].env["STORAGE_EMULATOR_HOST"],
            SPOTFLEET_AZURE_ARM_ENDPOINT=arm,
            SPOTFLEET_AZURE_POLLING_INTERVAL="0",
            SPOTFLEET_AZURE_PRICES_URL=f"{arm}/api/retail/prices",
            SPOTFLEET_VAST_URL=fakes["vast"].url,
            VAST_API_KEY=API_KEY,
            SPOTFLEET_LAMBDA_URL=fakes["lambda"].url,
            LAMBDA_API_KEY=LAMBDA_KEY,
            SPOTFLEET_RUNPOD_URL=fakes["runpod"].url,
            RUNPOD_API_KEY=RUNPOD_KEY,
        )

    def _post(self, fake: str, path: str, body: dict) -> None:
        httpx.post(f"{self.f[fake].url}/_control/{path}", json=body, timeout=30).raise_for_status()

    def _get(self, fake: str, path: str) -> Any:
        resp = httpx.get(f"{self.f[fake].url}/_control/{path}", timeout=30)
        resp.raise_for_status()
        return resp.json()

    def on_the_fakes(self, example: str) -> tuple[Path, str, set[str]]:
        """The example as shipped, pointed at the fakes: (spec path, fleet name, providers enabled)."""
        doc = yaml.safe_load((ROOT / "examples" / f"{example}.yaml").read_text())
        doc["backend"] = "cloud"
        enabled = doc.get("providers")
        settings = (
            {p: {} for p in enabled} if isinstance(enabled, list) else {p: dict(s or {}) for p, s in enabled.items()}
        )
        fixes = {
            "aws": {"ami": aws_world.MOTO_AMI, "regions": settings.get("aws", {}).get("regions") or list(AWS_REGIONS)},
            "gcp": {"project": "spec-project"},
            "azure": {"subscription_id": SUBSCRIPTION, "resource_group": f"rg-{doc['name']}"},
        }
        for name, extra in fixes.items():
            if name in settings:
                settings[name].update(extra)
        doc["providers"] = settings
        path = self.root / f"{example}.yaml"
        path.write_text(yaml.safe_dump(doc))
        return path, doc["name"], set(settings)

    def fleet(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [FLEET_BIN, *args], env=self.env, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL
        )

    def alive(self, fleet: str) -> dict[str, int]:
        """Live instances of ``fleet`` per provider, as each fake holds them."""
        out: dict[str, int] = {}

        def count(provider: str, n: int) -> None:
            if n:
                out[provider] = out.get(provider, 0) + n

        for region in AWS_REGIONS:
            got = self.aws.direct("ec2", region).describe_instances(
                Filters=[
                    {"Name": "tag:spotfleet:fleet", "Values": [fleet]},
                    {"Name": "instance-state-name", "Values": ["pending", "running"]},
                ]
            )
            count("aws", sum(len(r["Instances"]) for r in got["Reservations"]))
        count(
            "gcp",
            sum(
                1
                for vm in control(self.f["gce"].url, "instances")["instances"]
                if vm.get("labels", {}).get("spotfleet-fleet") == fleet and vm["status"] != "TERMINATED"
            ),
        )
        count(
            "azure",
            sum(1 for vm in self._get("arm", "state")["vms"] if (vm.get("tags") or {}).get("spotfleet:fleet") == fleet),
        )
        count(
            "vast",
            sum(
                1
                for i in self._get("vast", "instances")["instances"]
                if str(i.get("label") or "").startswith(f"spotfleet|{fleet}|") and not i["destroyed"]
            ),
        )
        count(
            "lambda",
            sum(
                1
                for i in self._get("lambda", "instances")["instances"]
                if {"key": "spotfleet:fleet", "value": fleet} in i["tags"]
                and i["status"] not in ("terminated", "terminating")
            ),
        )
        count(
            "runpod",
            sum(
                1
                for p in self._get("runpod", "pods")["pods"]
                if p["env"].get("SPOTFLEET_LABEL", "").startswith(f"spotfleet|{fleet}|") and not p["terminated"]
            ),
        )
        return out


@pytest.mark.emulator
def test_every_example_goes_up_and_down_against_the_fakes(fakes, tmp_path: Path):
    """All examples at once (each command's SDK start-up dominates; they overlap), each its own fleet."""
    clouds = Clouds(tmp_path, fakes)
    specs = {example: clouds.on_the_fakes(example) for example in EXAMPLES}
    for example, (_, _, enabled) in specs.items():
        assert enabled <= {"aws", "gcp", "azure", "vast", "lambda", "runpod"}, (
            f"{example}: a provider without a fake here"
        )
    with ThreadPoolExecutor(len(specs)) as pool:
        ups = dict(zip(specs, pool.map(lambda s: clouds.fleet("up", str(s[0]), "--yes", "--json"), specs.values())))
    for example, up in ups.items():
        assert up.returncode == 0, f"{example}: fleet up -> {up.returncode}\n{up.stderr[-3000:]}"
        report = json.loads(up.stdout)
        assert report["ok"] and report["desired"], example
        planned: dict[str, int] = {}
        for pool_id, n in report["desired"].items():
            planned[pool_id.split("/", 1)[0]] = planned.get(pool_id.split("/", 1)[0], 0) + n
        assert clouds.alive(specs[example][1]) == planned, example
    with ThreadPoolExecutor(len(specs)) as pool:
        downs = dict(zip(specs, pool.map(lambda s: clouds.fleet("down", s[1], "--yes", "--json"), specs.values())))
    for example, down in downs.items():
        assert down.returncode == 0, f"{example}: fleet down -> {down.returncode}\n{down.stderr[-3000:]}"
        assert clouds.alive(specs[example][1]) == {}, example
