"""Fleet spec validation: every kind of bad input names its field, value and fix."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from support.spec_texts import MINIMAL

from fleet.cli.main import cli
from fleet.errors import SpecError
from fleet.spec import Backend, Strategy, WorkloadKind, json_schema, load_spec, parse_spec


def problems(text: str) -> list[tuple[str, str]]:
    with pytest.raises(SpecError) as info:
        parse_spec(text)
    return info.value.problems


def only_problem(text: str) -> tuple[str, str]:
    found = problems(text)
    assert len(found) == 1, found
    return found[0]


def test_minimal_spec_gets_sane_defaults():
    spec = parse_spec(MINIMAL)
    assert spec.name == "quickstart"
    assert spec.backend is Backend.LOCAL
    assert spec.capacity.accelerators == {"H100": 1.0}
    assert spec.capacity.on_demand_gpus == 0
    assert spec.strategy is Strategy.PRICE_CAPACITY_OPTIMIZED
    assert spec.workload.kind is WorkloadKind.INDEPENDENT
    assert spec.diversification.max_pool_share == 0.5
    assert spec.bucket == "quickstart-checkpoints"
    # no providers listed -> every provider allowed with default settings
    assert spec.provider_settings("aws") is not None and spec.provider_settings("vast") is not None


def test_accelerator_list_counts_gpus_and_mapping_keeps_given_weights():
    spec = parse_spec(MINIMAL.replace("[H100]", "[h200, A100-80GB]"))
    assert spec.capacity.accelerators == {"H200": 1.0, "A100-80GB": 1.0}
    spec = parse_spec(MINIMAL.replace("[H100]", "{H100: 1.0, H200: 1.4}"))
    assert spec.weight("H200") == 1.4 and spec.weight("L4") == 0.0


def test_full_example_specs_in_examples_are_valid():
    from pathlib import Path

    specs = sorted(Path(__file__).resolve().parents[2].joinpath("examples").glob("*.yaml"))
    for path in specs:
        load_spec(path)


def test_spec_hash_is_stable_and_sensitive():
    a, b = parse_spec(MINIMAL), parse_spec(MINIMAL)
    assert a.spec_hash() == b.spec_hash()
    assert parse_spec(MINIMAL.replace("gpus: 8", "gpus: 9")).spec_hash() != a.spec_hash()


@pytest.mark.parametrize(
    "text, path, fragment",
    [
        (MINIMAL.replace("gpus: 8", "gpus: -3"), "capacity.gpus", "greater than 0, got -3"),
        (MINIMAL.replace("gpus: 8", "gpus: eight"), "capacity.gpus", "got 'eight'"),
        (MINIMAL.replace("[H100]", "[H10]"), "capacity.accelerators", "did you mean 'H100'"),
        (MINIMAL.replace("[H100]", "[]"), "capacity.accelerators", "at least one accelerator"),
        (MINIMAL.replace("[H100]", "{H100: -1}"), "capacity.accelerators", "weight of H100"),
        (MINIMAL + "  on_demand_gpus: 12\n", "capacity", "on_demand_gpus (12) exceeds gpus (8)"),
        (MINIMAL + "  on_demand_gpus: -1\n", "capacity.on_demand_gpus", "greater than or equal to 0"),
        (MINIMAL + "  gpus_per_node: {min: 8, max: 2}\n", "capacity.gpus_per_node", "must not exceed"),
        (MINIMAL.replace("name: quickstart", "name: Quick_Start"), "name", "lowercase"),
        (MINIMAL + "strategy: cheapest\n", "strategy", "'lowest-price'"),
        (MINIMAL + "providers: {gpc: {}}\n", "providers", "did you mean 'gcp'"),
        (MINIMAL + "providers: {aws: {regions: []}}\n", "providers.aws.regions", "empty list allows nothing"),
        (MINIMAL + "providers: {aws: {enabled: false}}\n", "", "every provider is disabled"),
        (MINIMAL + "providers: {aws: {region: [us-east-1]}}\n", "providers.aws.region", "did you mean 'regions'"),
        (MINIMAL + "budget: {max_per_hour: 0}\n", "budget.max_per_hour", "greater than 0"),
        (MINIMAL + "workload: {kind: batch}\n", "workload.kind", "'independent' or 'coupled'"),
        (MINIMAL + "checkpoint: {provider: dropbox}\n", "checkpoint.provider", "'s3'"),
        (
            MINIMAL + "diversification: {max_pool_share: 1.5}\n",
            "diversification.max_pool_share",
            "less than or equal to 1",
        ),
        (MINIMAL + "capacity_target: 3\n", "capacity_target", "unknown key"),
    ],
)
def test_each_bad_field_is_named_with_its_fix(text, path, fragment):
    got_path, message = only_problem(text)
    assert got_path == path
    assert fragment in message


def test_unknown_key_suggests_the_closest_field():
    path, message = only_problem(MINIMAL.replace("accelerators", "acelerators") + "  accelerators: [H100]\n")
    assert path == "capacity.acelerators"
    assert "did you mean 'accelerators'" in message


def test_problems_carry_the_yaml_line():
    _, message = only_problem(MINIMAL.replace("gpus: 8", "gpus: 0"))
    assert message.endswith("(line 4)")


def test_all_problems_reported_at_once():
    found = problems("name: x\ncapacity: {gpus: 0, accelerators: [ZZZ9]}\nstrategy: nope\n")
    assert {p for p, _ in found} == {"name", "capacity.gpus", "capacity.accelerators", "strategy"}


def test_missing_required_sections():
    found = problems("name: ab\n")
    assert found == [("capacity", "is required (line 1)")]


def test_yaml_syntax_error_names_the_line():
    path, message = only_problem("name: ab\ncapacity:\n  gpus: [8\n")
    assert path == ""
    assert "YAML syntax error at line" in message


@pytest.mark.parametrize("text", ["", "- a\n- b\n", "just a string\n"])
def test_non_mapping_document(text):
    assert "must be a mapping" in only_problem(text)[1]


def test_missing_file(tmp_path):
    with pytest.raises(SpecError, match="no such file"):
        load_spec(tmp_path / "nope.yaml")


def test_json_schema_describes_the_spec():
    schema = json_schema()
    assert schema["title"] == "spotfleet fleet spec"
    assert {"name", "capacity"} <= set(schema["required"])
    assert "max_pool_share" in json.dumps(schema)


def test_cli_check_and_schema(tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text(MINIMAL)
    bad = tmp_path / "bad.yaml"
    bad.write_text(MINIMAL.replace("gpus: 8", "gpus: 0"))
    runner = CliRunner()
    ok = runner.invoke(cli, ["spec", "check", str(good), "--json"])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.output)["name"] == "quickstart"
    res = runner.invoke(cli, ["spec", "check", str(bad)])
    assert res.exit_code == 2
    assert "capacity.gpus" in res.output and "Traceback" not in res.output
    schema = runner.invoke(cli, ["spec", "schema"])
    assert schema.exit_code == 0 and json.loads(schema.output)["title"] == "spotfleet fleet spec"
