"""``fleet check``: one line per provider, the fix when something is missing, exit 1 then."""

from __future__ import annotations

import json

from click.testing import CliRunner

from fleet.cli.main import cli
from providers import registry
from providers.base import CheckResult


def test_each_provider_gets_a_line_and_failures_name_the_fix(monkeypatch, tmp_path):
    monkeypatch.setattr(registry, "_CLOUD_CHECKS", {
        "aws": lambda settings: CheckResult(provider="aws", ok=True, identity="arn:aws:iam::123:user/ml",
                                            can_price=True, can_launch=True,
                                            quotas={"Running On-Demand P instances us-east-1": "192 vCPUs"}),
        "gcp": lambda settings: CheckResult(provider="gcp", ok=False, detail="no credentials",
                                            fix="gcloud auth application-default login"),
    })
    monkeypatch.setattr(registry, "_CLOUD_ADAPTERS", {"aws": object, "gcp": object})
    result = CliRunner().invoke(cli, ["--home", str(tmp_path), "check", "aws", "gcp"])
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert lines[0].startswith("aws    ok") and "identity arn:aws:iam::123:user/ml" in lines[0]
    assert "quota Running On-Demand P instances us-east-1: 192 vCPUs" in lines[1]
    assert lines[2].startswith("gcp    FAIL") and "no credentials" in lines[2]
    assert lines[3].strip() == "fix: gcloud auth application-default login"

    result = CliRunner().invoke(cli, ["--home", str(tmp_path), "check", "aws", "--json"])
    assert result.exit_code == 0
    assert json.loads(result.output)[0]["identity"] == "arn:aws:iam::123:user/ml"


def test_a_provider_without_an_adapter_is_reported_not_raised(monkeypatch, tmp_path):
    monkeypatch.setattr(registry, "_CLOUD_CHECKS", {})
    monkeypatch.setattr(registry, "ADAPTER_EXTRAS", {"aws": "aws", "nosuch": "nosuch"})
    monkeypatch.setattr(registry, "_CLOUD_ADAPTERS", {})
    results = __import__("fleet.cli.check", fromlist=["run_checks"]).run_checks(["nosuch"], {})
    assert results[0].ok is False and "no adapter" in results[0].detail
