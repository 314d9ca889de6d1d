"""``fleet spec schema`` (fleet.spec.json_schema) accepts what ``fleet spec check`` accepts:
every shipped example and the documented shorthands, checked with a JSON Schema validator
as an editor would."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml
from click.testing import CliRunner

from fleet.cli.main import cli
from fleet.errors import SpecError
from fleet.spec import json_schema, load_spec, parse_spec

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.yaml"))
BASE = "name: ab\ncapacity: {gpus: 8, accelerators: [H100]}\n"


def validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(CliRunner().invoke(cli, ["spec", "schema"]).output)  # what the user's editor reads
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_there_are_examples_to_check():
    assert {p.name for p in EXAMPLES} >= {"quickstart.yaml", "batch-inference.yaml"}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_shipped_example_validates_against_the_schema(path: Path):
    load_spec(path)  # the spec is valid ...
    errors = [f"{list(e.path)}: {e.message}" for e in validator().iter_errors(yaml.safe_load(path.read_text()))]
    assert errors == []  # ... and the schema says so too


@pytest.mark.parametrize(
    "extra",
    [
        "providers: [aws, gcp]",
        "providers: []",
        "providers: {aws: , gcp: {spot: false}}",
        "capacity: {gpus: 8, accelerators: {H100: 1.0, H200: 1.3}}",
    ],
)
def test_documented_shorthands_validate_as_the_loader_takes_them(extra: str):
    text = BASE + extra if not extra.startswith("capacity") else "name: ab\n" + extra
    parse_spec(text)
    assert list(validator().iter_errors(yaml.safe_load(text))) == []


@pytest.mark.parametrize("extra", ["providers: [aws, 3]", "providers: aws", "budget: {max_per_hour: cheap}"])
def test_the_schema_still_rejects_what_the_loader_rejects(extra: str):
    with pytest.raises(SpecError):
        parse_spec(BASE + extra)
    assert list(validator().iter_errors(yaml.safe_load(BASE + extra)))


def test_a_list_of_accelerators_must_name_one():
    doc = {"name": "ab", "capacity": {"gpus": 8, "accelerators": []}}
    assert list(validator().iter_errors(doc))
    assert json_schema()["$defs"]["Capacity"]["properties"]["accelerators"]["anyOf"][1]["minItems"] == 1
