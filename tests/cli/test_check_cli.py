"""``fleet check``: a short block per provider and one for the local cloud, the fix when something
is missing, "not configured" for a provider never set up, exit 1 only when what is needed fails;
every line fits 80 columns."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from fleet.cli.main import cli
from providers import registry
from providers.base import CheckResult

LONG = (
    "the caller is not authorized to perform ec2:CreateFleet on resource arn:aws:ec2:us-east-1:123:fleet/* "
    "because no identity-based policy allows the ec2:CreateFleet action (encoded authorization failure)"
)
CHECKS = {
    "aws": lambda settings: CheckResult(
        provider="aws",
        ok=True,
        identity="arn:aws:iam::123:user/ml",
        can_price=True,
        can_launch=True,
        quotas={"Running On-Demand P instances us-east-1": "192 vCPUs"},
    ),
    "gcp": lambda settings: CheckResult(
        provider="gcp", ok=False, detail="no credentials", fix="gcloud auth application-default login"
    ),
    "azure": lambda settings: CheckResult(
        provider="azure",
        ok=False,
        configured=False,
        detail="no subscription",
        fix="az login and set $AZURE_SUBSCRIPTION_ID",
    ),
    "vast": lambda settings: CheckResult(
        provider="vast", ok=False, configured=False, detail="no API key", fix="set $VAST_API_KEY"
    ),
}


@pytest.fixture
def checks(monkeypatch):
    table = dict(CHECKS)  # a test may change an answer after this
    monkeypatch.setattr(
        registry,
        "_records",
        {
            name: replace(rec, check=lambda settings, n=name: table[n](settings), sdk_modules=())
            if name in table
            else rec
            for name, rec in registry.records().items()
        },
    )
    return table


def check(tmp_path: Path, *args: str) -> tuple[int, list[str]]:
    result = CliRunner().invoke(cli, ["--home", str(tmp_path / "home"), "check", *args], env={"COLUMNS": "80"})
    return result.exit_code, result.output.splitlines()


def test_each_provider_gets_a_block_and_failures_name_the_fix(checks, tmp_path):
    code, lines = check(tmp_path, "aws", "gcp")
    assert code == 1  # gcp was asked for and is not usable
    assert lines[0] == "aws    ok  price yes  launch yes"
    assert lines[1].strip() == "arn:aws:iam::123:user/ml"
    assert lines[2].strip() == "quota Running On-Demand P instances us-east-1: 192 vCPUs"
    assert lines[3] == "gcp    FAIL  price ?  launch ?"
    assert lines[4].strip() == "no credentials" and lines[5].strip() == "fix: gcloud auth application-default login"

    result = CliRunner().invoke(cli, ["--home", str(tmp_path), "check", "aws", "--json"])
    assert result.exit_code == 0
    assert json.loads(result.output)[0]["identity"] == "arn:aws:iam::123:user/ml"


def test_a_provider_never_set_up_reads_not_configured_and_the_local_cloud_has_a_line(checks, tmp_path):
    code, lines = check(tmp_path)
    assert "azure  not configured" in lines and "vast   not configured" in lines
    assert not any(line.startswith(("azure  FAIL", "vast   FAIL")) for line in lines)
    local = lines.index("local  ok  price yes  launch yes")
    block = " ".join(line.strip() for line in lines[local + 1 : local + 4])
    assert f"simulated cloud at {tmp_path / 'home' / 'localcloud'}" in block and "no account needed" in block
    assert code == 1  # gcp is configured and fails: it counts
    checks["gcp"] = lambda settings: CheckResult(provider="gcp", ok=False, configured=False, detail="no project")
    code, lines = check(tmp_path)
    assert code == 0 and "gcp    not configured" in lines  # nothing configured fails: exit 0


def test_a_local_cloud_user_with_nothing_configured_passes(checks, tmp_path):
    for name in ("aws", "gcp"):
        checks[name] = lambda settings, name=name: CheckResult(
            provider=name, ok=False, configured=False, detail="no credentials", fix="set it up"
        )
    spec = tmp_path / "quick.yaml"
    spec.write_text(
        "name: quick\nbackend: local\ncapacity: {gpus: 8, accelerators: [H100]}\nproviders: [aws, gcp, azure]\n"
    )
    code, lines = check(tmp_path, str(spec))
    assert code == 0 and lines[0] == "local  ok  price yes  launch yes"
    assert not any("FAIL" in line or "not configured" in line for line in lines)  # only what the spec needs


def test_a_cloud_spec_needs_its_providers(checks, tmp_path):
    spec = tmp_path / "cloud.yaml"
    spec.write_text("name: cloudy\ncapacity: {gpus: 8, accelerators: [H100]}\nproviders: [aws, azure]\n")
    code, lines = check(tmp_path, str(spec))
    assert code == 1 and [line.split()[0] for line in lines if not line.startswith(" ")] == ["aws", "azure"]
    spec.write_text("name: cloudy\ncapacity: {gpus: 8, accelerators: [H100]}\nproviders: [aws]\n")
    assert check(tmp_path, "--spec", str(spec))[0] == 0
    spec.write_text("name: cloudy\ncapacity: {gpus: 8, accelerators: [H100]}\n")  # every provider allowed
    assert check(tmp_path, str(spec))[0] == 0  # one usable is enough


def test_every_line_fits_80_columns_and_words_are_not_broken(checks, tmp_path):
    checks["aws"] = lambda settings: CheckResult(
        provider="aws",
        ok=False,
        identity="arn:aws:iam::123:user/ml",
        can_price=True,
        can_launch=False,
        detail=LONG,
        fix="grant ec2:DescribeSpotPriceHistory, ec2:CreateFleet, ec2:RunInstances and iam:PassRole",
    )
    code, lines = check(tmp_path)
    assert code == 1
    assert all(len(line) <= 80 or len(line.split()) == 1 for line in lines)  # only a lone long word (a path) runs on
    assert max(len(line) for line in lines if "localcloud" not in line) <= 80
    words = " ".join(line.strip() for line in lines).split()
    assert " ".join(LONG.split()) in " ".join(words)  # every word whole, in order


def test_an_argument_that_is_neither_a_provider_nor_a_spec_is_a_usage_error(checks, tmp_path):
    result = CliRunner().invoke(cli, ["--home", str(tmp_path), "check", "nosuch"])
    assert result.exit_code == 64 and "neither a provider" in result.output


def test_a_provider_without_an_adapter_is_reported_not_raised(monkeypatch, tmp_path):
    monkeypatch.setattr(registry, "_records", {**registry.records(), "nosuch": registry.ProviderRecord("nosuch")})
    results = __import__("fleet.cli.check", fromlist=["run_checks"]).run_checks(["nosuch"], {})
    assert results[0].ok is False and "no adapter" in results[0].detail and not results[0].configured
