"""`fleet plan` through click's CliRunner, on the shipped snapshot and the local cloud."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from fleet.cli.main import cli
from fleet.model import Plan
from providers.registry import SIMULATED_ONLY

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "examples" / "h100-multicloud.yaml")


@pytest.fixture
def run(tmp_path, monkeypatch):
    monkeypatch.setenv("SPOTFLEET_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("SPOTFLEET_LOCAL_CLOUD", raising=False)
    runner = CliRunner()

    def invoke(*args: str):
        return runner.invoke(cli, list(args), catch_exceptions=False)

    return invoke


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "fleet.yaml"
    path.write_text(text)
    return str(path)


def test_plan_prints_allocations_totals_exclusions_and_source(run):
    result = run("plan", EXAMPLE)
    assert result.exit_code == 0, result.output
    out = result.output
    for text in (
        "fleet h100-multicloud",
        "weighted GPUs   6",
        "of 64",
        "true cost",
        "interruptions",
        "vs on-demand",
        "saves",
        "checkpoint      every",
        "region not allowed",
        "offers: snapshot",
        "2026-11-29",
    ):
        assert text in out, text


def test_json_is_the_plan_and_out_saves_the_same(run, tmp_path):
    out_file = tmp_path / "plan.json"
    result = run("plan", EXAMPLE, "--json", "--out", str(out_file))
    assert result.exit_code == 0, result.output
    printed = Plan.from_json(result.output)
    saved = Plan.from_json(out_file.read_text())
    assert printed == saved and printed.feasible
    assert json.loads(result.output)["id"] == printed.id
    t = printed.totals
    assert t.weighted_gpus >= 64 and t.on_demand_weighted_gpus >= 16 and t.price_per_hour <= 180
    assert 0 < t.savings_fraction < 1 and t.checkpoint_interval_seconds > 0


def test_strategy_option_overrides_the_spec(run):
    result = run("plan", EXAMPLE, "--json", "--strategy", "lowest-price")
    assert result.exit_code == 0
    assert Plan.from_json(result.output).strategy == "lowest-price"


def test_infeasible_spec_exits_3_with_the_binding_limit_and_partial_plan(run, tmp_path):
    spec = write(tmp_path, "name: tight\ncapacity: {gpus: 64, accelerators: [H100]}\nbudget: {max_per_hour: 20}\n")
    result = run("plan", spec)
    assert result.exit_code == 3
    assert "infeasible: budget $20.00/h allows" in result.output and "of 64 weighted GPUs" in result.output
    assert "weighted GPUs   " in result.output  # the partial plan is still shown
    as_json = run("plan", spec, "--json")
    assert as_json.exit_code == 3
    partial = Plan.from_json(as_json.output)
    assert not partial.feasible and partial.totals.price_per_hour <= 20 and partial.allocations


def test_spec_errors_are_one_line_with_exit_2(run, tmp_path):
    result = run("plan", write(tmp_path, "name: x1\ncapacity: {gpus: -4, accelerators: [H100]}\n"))
    assert result.exit_code == 2
    assert "capacity.gpus" in result.output and "Traceback" not in result.output


def test_no_offer_left_names_the_filter(run, tmp_path):
    spec = write(
        tmp_path,
        "name: nowhere\ncapacity: {gpus: 8, accelerators: [H100]}\nproviders:\n  aws: {regions: [mars-north-1]}\n",
    )
    result = run("plan", spec)
    assert result.exit_code == 1
    assert result.output.startswith("error: none of the") and "region not allowed" in result.output


def test_unwritable_out_path_is_a_clear_error(run, tmp_path):
    result = run("plan", EXAMPLE, "--out", str(tmp_path / "missing-dir" / "plan.json"))
    assert result.exit_code == 1 and "cannot write the plan" in result.output


def test_local_backend_plans_from_the_local_cloud(run, tmp_path):
    spec = write(
        tmp_path, "name: local-demo\nbackend: local\ncapacity: {gpus: 8, accelerators: [H100], on_demand_gpus: 2}\n"
    )
    result = run("plan", spec)
    assert result.exit_code == 0, result.output
    assert "offers: local" in result.output
    plan = Plan.from_json(run("plan", spec, "--json").output)
    assert plan.feasible and {a.offer.source for a in plan.allocations} == {"local"}


NEOCLOUD = """name: neo
capacity: {{gpus: 16, accelerators: [H100], on_demand_gpus: 8}}
providers: [aws, gcp, {name}]
"""
#: A provider in the snapshot that no adapter ships for yet (the marking goes once every one has an adapter).
NO_ADAPTER = next((r.name for r in SIMULATED_ONLY), "")


@pytest.mark.skipif(not NO_ADAPTER, reason="every provider in the snapshot has an adapter")
def test_plan_marks_a_provider_without_an_adapter_and_up_refuses_it_in_one_line(run, tmp_path):
    name = NO_ADAPTER
    spec = write(tmp_path, NEOCLOUD.format(name=name))
    result = run("plan", spec)
    assert result.exit_code == 0, result.output
    assert f"cannot launch here: {name} (no cloud adapter for {name}" in " ".join(result.output.split())
    plan = Plan.from_json(run("plan", spec, "--json").output)
    (mark,) = [n for n in plan.notes if n.startswith("cannot launch here: ")]
    assert mark.startswith(f"cannot launch here: {name} (no cloud adapter for {name} in this version of spotfleet)")
    assert any(a.offer.pool.provider == name for a in plan.allocations)  # priced from the snapshot
    up = run("up", spec, "--yes")
    assert up.exit_code == 1 and up.output.count("\n") == 1
    assert up.output.startswith(f"error: cannot launch on {name}: no cloud adapter for {name}")
    assert not (tmp_path / "home" / "state.db").exists()  # refused before anything was recorded


def test_a_provider_whose_sdk_is_missing_is_marked_with_the_extra_to_install(run, tmp_path, monkeypatch):

    for mod in [m for m in sys.modules if m == "providers.gcp" or m.startswith("providers.gcp.")]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setitem(sys.modules, "google.cloud.compute_v1", None)  # the SDK is not importable
    monkeypatch.setitem(sys.modules, "google.api_core", None)
    monkeypatch.setitem(sys.modules, "google", None)
    result = run("plan", write(tmp_path, NEOCLOUD.format(name="runpod")))
    assert "cannot launch here: gcp (the gcp adapter needs a package" in " ".join(result.output.split())
    from fleet.distribution import install_command

    assert install_command("gcp") in " ".join(result.output.split())  # a command that works for this install
