"""`fleet export pulumi SPEC DIR`: a complete Pulumi project whose program runs under the mocks
and declares the plan it saved."""

from __future__ import annotations

import json
import runpy
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from support.stack_specs import MULTI

FLEET = str(Path(sys.executable).with_name("fleet"))


def export(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [FLEET, "--home", str(tmp / "home"), "export", "pulumi", *args], capture_output=True, text=True, timeout=300
    )


@pytest.fixture
def project(tmp_path) -> tuple[Path, dict]:
    spec = tmp_path / "in.yaml"
    spec.write_text(MULTI)
    done = export(tmp_path, str(spec), str(tmp_path / "proj"), "--json")
    assert done.returncode == 0, done.stderr
    return tmp_path / "proj", json.loads(done.stdout)


def test_export_writes_a_complete_project(project):
    root, report = project
    assert (
        sorted(p.name for p in root.iterdir())
        == sorted(report["files"])
        == ["Pulumi.yaml", "README.md", "__main__.py", "plan.json", "requirements.txt", "spec.yaml", "wheels"]
    )
    meta = yaml.safe_load((root / "Pulumi.yaml").read_text())
    assert meta["runtime"]["name"] == "python" and meta["name"] == "multi-fleet"
    assert meta["config"]["spotfleet:spec"]["value"] == "spec.yaml"
    wheels = [w.name for w in (root / "wheels").iterdir()]  # spotfleet is on no index: the project carries its wheel
    assert len(wheels) == 1 and wheels[0].startswith("spotfleet-0.1.0+g") and wheels[0].endswith("-py3-none-any.whl")
    assert (root / "requirements.txt").read_text() == f"./wheels/{wheels[0]}[pulumi]\n"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--no-index", "-r", "requirements.txt"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0 and "spotfleet-0.1.0+g" in done.stdout, done.stderr  # pip finds it from the project
    plan = json.loads((root / "plan.json").read_text())
    assert plan["id"] == report["plan_id"] and "pulumi preview" in (root / "README.md").read_text()


def test_export_refuses_to_overwrite_without_force(project, tmp_path):
    root, _ = project
    done = export(tmp_path, str(root / "spec.yaml"), str(root))
    assert done.returncode == 1 and "--force" in done.stderr and "Traceback" not in done.stderr
    assert export(tmp_path, str(root / "spec.yaml"), str(root), "--force").returncode == 0


def test_the_generated_readme_names_the_commands_as_they_take_their_arguments(project):
    root, _ = project
    text = (root / "README.md").read_text()
    assert "`fleet rebalance multi`" in text and "fleet rebalance spec.yaml" not in text
    assert "`fleet plan spec.yaml --out plan.json`" in text


def test_a_plan_on_a_provider_the_stacks_do_not_declare_is_refused_in_one_line(tmp_path):
    spec = tmp_path / "neo.yaml"
    spec.write_text(
        "name: neo\ncapacity: {gpus: 8, accelerators: [H100], on_demand_gpus: 8}\n"
        "providers: [runpod]\nnode: {spotfleet: preinstalled}\n"
    )  # (stacks refuse `ship` too)
    done = export(tmp_path, str(spec), str(tmp_path / "out"))
    assert done.returncode == 1 and "Traceback" not in done.stderr and done.stderr.count("\n") == 1
    assert (
        done.stderr.startswith("error: the plan puts instances on runpod (")
        and "which the Pulumi stacks" in done.stderr
    )
    assert "; runpod: RunPod has no Pulumi provider" in done.stderr  # the reason its registration record gives
    assert not (tmp_path / "out").exists()


def test_a_plan_on_oci_is_refused_by_name_with_the_reason(tmp_path):
    spec = tmp_path / "neo.yaml"
    spec.write_text(
        "name: neo\ncapacity: {gpus: 8, accelerators: [H100], on_demand_gpus: 8}\n"
        "providers: [oci]\nnode: {spotfleet: preinstalled}\n"
    )
    done = export(tmp_path, str(spec), str(tmp_path / "out"))
    assert done.returncode == 1 and "Traceback" not in done.stderr and done.stderr.count("\n") == 1
    assert done.stderr.startswith("error: the plan puts instances on oci (1 instance(s))")
    assert "; oci: spotfleet ships no Pulumi stack for OCI" in done.stderr  # its record's reason
    assert not (tmp_path / "out").exists()


def test_lambda_is_refused_by_name_with_its_records_reason(tmp_path):
    spec = tmp_path / "lam.yaml"
    spec.write_text(
        "name: lam\ncapacity: {gpus: 2, accelerators: [A10], on_demand_gpus: 2}\n"
        "providers: [lambda]\nnode: {spotfleet: preinstalled}\n"
    )  # priced from the snapshot: no key
    done = export(tmp_path, str(spec), str(tmp_path / "out"))
    assert done.returncode == 1 and "Traceback" not in done.stderr and done.stderr.count("\n") == 1
    assert done.stderr.startswith("error: the plan puts instances on lambda (")
    assert "Lambda Cloud has no Pulumi provider" in done.stderr and not (tmp_path / "out").exists()


def test_export_of_a_bad_spec_names_the_field(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x1\ncapacity: {gpus: 0, accelerators: [H100]}\n")
    done = export(tmp_path, str(bad), str(tmp_path / "out"))
    assert done.returncode == 2 and "capacity.gpus" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()


def test_exported_program_runs_under_the_mocks(project, monkeypatch):
    pytest.importorskip("pulumi", reason="the Pulumi SDK is not installed: pip install -e '.[pulumi]'")
    pytest.importorskip("pulumi_aws", reason="pulumi-aws is not installed")
    pytest.importorskip("pulumi_gcp", reason="pulumi-gcp is not installed")
    import pulumi.runtime
    from harness import declare

    root, report = project
    meta = yaml.safe_load((root / "Pulumi.yaml").read_text())
    monkeypatch.setenv("HF_TOKEN", "hf-from-the-environment")
    monkeypatch.chdir("/")  # the program finds its files from its own path

    def run():
        pulumi.runtime.set_all_config({key: entry["value"] for key, entry in meta["config"].items()})
        return runpy.run_path(str(root / "__main__.py"))

    declared, _ = declare(run)
    stack_counts = {}
    for d in declared:
        if d.type == "gcp:compute/regionInstanceGroupManager:RegionInstanceGroupManager":
            stack_counts[d.name] = d.inputs["targetSize"]
    from fleet.model import PoolKey
    from stacks.layout import logical_name

    expected = {logical_name(PoolKey.from_id(p)): c for p, c in report["counts"].items() if p.startswith("gcp/")}
    assert stack_counts == expected and expected
    assert any(d.type == "spotfleet:index:SpotFleet" for d in declared)
    assert len([d for d in declared if d.type == "aws:ec2/launchTemplate:LaunchTemplate"]) == sum(
        1 for p in report["counts"] if p.startswith("aws/")
    )


def test_export_of_a_spec_that_ships_spotfleet_is_refused_with_the_fix(tmp_path):
    spec = tmp_path / "ship.yaml"  # node.spotfleet: ship needs a URL per launch, which a template outlives
    spec.write_text(MULTI.replace("spotfleet: preinstalled", "spotfleet: ship"))
    done = export(tmp_path, str(spec), str(tmp_path / "out"))
    assert done.returncode == 1 and "node.spotfleet" in done.stderr and "'preinstalled'" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "out").exists()
