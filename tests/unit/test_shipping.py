"""Shipping spotfleet to nodes: the wheel of the running code, its URL per store, the spec setting,
and the GPU lines the node agent logs first."""

from __future__ import annotations

import json
import shutil
import sys
import urllib.request
import zipfile
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))

from fleet.agent.gpus import gpu_lines  # noqa: E402
from fleet.cli.main import cli  # noqa: E402
from fleet.errors import (
    FleetError,  # noqa: E402
    SpecError,  # noqa: E402
)
from fleet.model import NodeConfig  # noqa: E402
from fleet.provisioning import ship as shipping  # noqa: E402
from fleet.provisioning.wheel import build, package_root  # noqa: E402
from fleet.spec import parse_spec  # noqa: E402

ROOT = package_root()
SPEC = "name: demo\ncapacity: {gpus: 8, accelerators: [H100]}\n"


def copy_tree(dest: Path) -> Path:
    """A copy of the packages and pyproject the wheel is built from (to edit without touching the checkout)."""
    for package in ("fleet", "providers", "stacks"):
        shutil.copytree(ROOT / package, dest / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", dest / "pyproject.toml")
    return dest


# ---- the wheel ----------------------------------------------------------------------------------
def test_the_wheel_holds_every_package_and_the_data_and_installs_the_fleet_command(tmp_path: Path):
    wheel = build(tmp_path / "cache")
    names = zipfile.ZipFile(wheel.path).namelist()
    for required in ("fleet/__init__.py", "providers/__init__.py", "stacks/__init__.py", "fleet/bootstrap.py"):
        assert required in names
    data = sorted(
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "fleet" / "data").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    )
    assert data and set(data) <= set(names)
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    info = f"spotfleet-{wheel.version}.dist-info"
    meta = zipfile.ZipFile(wheel.path).read(f"{info}/METADATA").decode()
    assert "Requires-Python: >=3.10" in meta and 'Requires-Dist: boto3>=1.34; extra == "s3"' in meta
    assert "fleet = fleet.cli.main:main" in zipfile.ZipFile(wheel.path).read(f"{info}/entry_points.txt").decode()
    assert zipfile.ZipFile(wheel.path).testzip() is None


def test_the_wheel_is_deterministic_cached_and_renamed_by_an_edit(tmp_path: Path):
    first = build(tmp_path / "a")
    second = build(tmp_path / "b")
    assert first.name == second.name and first.path.read_bytes() == second.path.read_bytes()
    stamp = first.path.stat().st_mtime_ns
    assert build(tmp_path / "a").path == first.path and first.path.stat().st_mtime_ns == stamp  # cached: not rewritten
    tree = copy_tree(tmp_path / "tree")
    assert build(tmp_path / "c", root=tree).name == first.name  # the same content, the same wheel
    (tree / "fleet" / "bootstrap.py").write_text((tree / "fleet" / "bootstrap.py").read_text() + "\n# edited\n")
    edited = build(tmp_path / "c", root=tree)
    assert edited.name != first.name and edited.name.startswith("spotfleet-0.1.0+g")


# ---- shipping through a store --------------------------------------------------------------------
def test_a_rerun_uploads_nothing_and_reuses_the_url_until_it_gets_short(tmp_path: Path):
    bucket = tmp_path / "bucket"
    now = [1_000_000.0]
    first = shipping.ship(bucket.as_uri(), cache_dir=tmp_path / "cache", clock=lambda: now[0])
    stored = bucket / "_spotfleet" / "wheels" / first.file
    assert first.uploaded and stored.is_file()
    with urllib.request.urlopen(first.url) as got:  # the local store's URL is the file itself
        assert got.read() == (tmp_path / "cache" / first.file).read_bytes()
    stamp = stored.stat().st_mtime_ns
    again = shipping.ship(bucket.as_uri(), cache_dir=tmp_path / "cache", clock=lambda: now[0])
    assert (
        not again.uploaded
        and stored.stat().st_mtime_ns == stamp
        and again == first.__class__(uri=first.uri, url=first.url, file=first.file, sha256=first.sha256, uploaded=False)
    )
    urls = tmp_path / "cache" / "urls.json"
    assert urls.stat().st_mode & 0o077 == 0  # URLs grant reads: owner only
    assert json.loads(urls.read_text())[first.uri]["expires"] == now[0] + shipping.URL_SECONDS
    now[0] += shipping.URL_SECONDS - shipping.URL_MIN_LEFT - 1  # still 6 h left: the same URL, not re-signed
    shipping.ship(bucket.as_uri(), cache_dir=tmp_path / "cache", clock=lambda: now[0])
    assert json.loads(urls.read_text())[first.uri]["expires"] == 1_000_000.0 + shipping.URL_SECONDS
    now[0] += 2  # less than 6 h left: signed anew
    shipping.ship(bucket.as_uri(), cache_dir=tmp_path / "cache", clock=lambda: now[0])
    assert json.loads(urls.read_text())[first.uri]["expires"] == now[0] + shipping.URL_SECONDS


def test_a_cloud_fleet_without_a_bucket_cannot_ship_and_is_told_both_fixes():
    spec = parse_spec(
        SPEC + "backend: cloud\nproviders: {aws: {regions: [us-east-1]}}\ncheckpoint: {provider: local}\n"
    )
    with pytest.raises(FleetError, match="checkpoint.provider.*node.spotfleet") as info:
        shipping.node_software(spec, {}, NodeConfig())
    assert "'preinstalled'" in str(info.value)
    same = NodeConfig(spotfleet="preinstalled")
    assert shipping.node_software(spec, {}, same) is same  # nothing to ship: nothing asked of a store


@pytest.mark.emulator
def test_an_s3_url_fetches_the_wheel_without_credentials_and_is_short_lived(tmp_path: Path):
    import aws_world

    world = aws_world.fresh()
    world.direct("s3").create_bucket(Bucket="ship-bucket")
    env = {**aws_world.CREDENTIALS, "AWS_ENDPOINT_URL": world.moto_url}
    got = shipping.ship("s3://ship-bucket/demo", env=env, cache_dir=tmp_path / "cache")
    assert got.uri == f"s3://ship-bucket/demo/_spotfleet/wheels/{got.file}" and "Signature=" in got.url
    with urllib.request.urlopen(urllib.request.Request(got.url)) as answer:  # no credentials: the URL is enough
        assert answer.read() == (tmp_path / "cache" / got.file).read_bytes()
    assert not shipping.ship("s3://ship-bucket/demo", env=env, cache_dir=tmp_path / "cache").uploaded
    # it expires: SigV4 query signing with the 12 h lifetime (moto does not enforce expiry, S3 does)
    query = parse_qs(urlsplit(got.url).query)
    assert query["X-Amz-Expires"] == [str(shipping.URL_SECONDS)] and query["X-Amz-Algorithm"] == ["AWS4-HMAC-SHA256"]
    assert query["X-Amz-Credential"][0].startswith("testing/") and "/us-east-1/s3/" in query["X-Amz-Credential"][0]
    west = world.direct("s3", "us-west-2")  # a bucket elsewhere: signed for its region, or S3 refuses it
    west.create_bucket(Bucket="ship-west", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    far = shipping.ship("s3://ship-west/demo", env=env, cache_dir=tmp_path / "cache")
    assert "/us-west-2/s3/" in parse_qs(urlsplit(far.url).query)["X-Amz-Credential"][0]


# ---- the spec setting ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "value", ["ship", "preinstalled", "spotfleet[s3]==0.1.0", "git+https://example.com/spotfleet.git@v0.1.0"]
)
def test_node_spotfleet_takes_ship_preinstalled_or_a_requirement(value: str):
    assert parse_spec(SPEC + f"node: {{spotfleet: '{value}'}}\n").node.spotfleet == value


@pytest.mark.parametrize("value", ["numpy", "spotfleet; rm -rf /", "", "spotfleet $(id)"])
def test_a_bad_node_spotfleet_names_the_field_and_the_choices(value: str):
    with pytest.raises(SpecError) as info:
        parse_spec(SPEC + f"node: {{spotfleet: '{value}'}}\n")
    ((path, message),) = info.value.problems
    assert path == "node.spotfleet" and "'ship', 'preinstalled' or a pip requirement" in message


def test_the_spec_schema_describes_node_spotfleet():
    done = CliRunner().invoke(cli, ["spec", "schema"])
    assert done.exit_code == 0
    text = json.dumps(json.loads(done.output))
    assert '"spotfleet"' in text and "preinstalled" in text


# ---- the GPU lines -------------------------------------------------------------------------------
def stand_in(bin_dir: Path, body: str) -> None:
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "nvidia-smi").write_text(f"#!/bin/sh\n{body}\n")
    (bin_dir / "nvidia-smi").chmod(0o755)


def test_gpu_lines_say_which_gpus_nvidia_smi_sees(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    assert gpu_lines() == [
        "gpus: nvidia-smi is not installed: no NVIDIA driver on this image (set node.image to a GPU image)"
    ]
    stand_in(
        tmp_path / "bin",
        'echo "NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver" >&2; exit 9',
    )
    assert gpu_lines() == [
        "gpus: nvidia-smi failed (exit 9): NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"
    ]
    stand_in(tmp_path / "bin", "exit 0")
    assert gpu_lines() == ["gpus: nvidia-smi answered but lists no GPU"]
    stand_in(
        tmp_path / "bin",
        'case "$*" in *--query-gpu=index,name,driver_version,memory.total*--format=csv,noheader*)\n'
        'echo "0, NVIDIA A100-SXM4-80GB, 550.54.15, 81920 MiB"; echo "1, NVIDIA A100-SXM4-80GB, 550.54.15, 81920 MiB";;\n'
        "*) exit 2;; esac",
    )
    assert gpu_lines() == [
        "gpus: 2 seen by nvidia-smi",
        "gpu 0, NVIDIA A100-SXM4-80GB, 550.54.15, 81920 MiB",
        "gpu 1, NVIDIA A100-SXM4-80GB, 550.54.15, 81920 MiB",
    ]
