"""The deploy examples under examples/deploy parse, and every command they run is one the
``fleet`` CLI accepts as written (checked with the CLI's own option parser)."""

from __future__ import annotations

import configparser
import re
import shlex
from pathlib import Path

import click
import pytest
import yaml

from fleet.cli.main import cli

DEPLOY = Path(__file__).resolve().parents[2] / "examples" / "deploy"
CRON_FIELD = re.compile(r"^(\*|\d+(-\d+)?)(/\d+)?(,(\*|\d+(-\d+)?)(/\d+)?)*$")


def assert_fleet_command(argv: list[str], *, every: bool) -> None:
    """``argv`` runs ``fleet rebalance NAME`` with options the CLI accepts."""
    assert Path(argv[0]).name == "fleet", argv
    args = argv[1:]
    assert args[0] == "rebalance", argv
    command = cli.get_command(click.Context(cli), "rebalance")
    ctx = command.make_context("rebalance", list(args[1:]))  # raises on an unknown or bad option
    assert re.fullmatch(r"[a-z][a-z0-9-]{0,38}[a-z0-9]", ctx.params["name"])
    assert (ctx.params["every"] is not None) is every


def manifests(name: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((DEPLOY / "kubernetes" / name).read_text()) if d]


def test_cron_line():
    lines = [
        line for line in (DEPLOY / "crontab").read_text().splitlines() if line.strip() and not line.startswith("#")
    ]
    jobs = [line for line in lines if not re.match(r"^[A-Z_]+=", line)]
    assert len(jobs) == 1
    fields = jobs[0].split(None, 5)
    assert all(CRON_FIELD.match(f) for f in fields[:5]), fields
    command = fields[5].split(">>", 1)[0]
    assert_fleet_command(shlex.split(command), every=False)


def test_systemd_service_and_timer():
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str
    unit.read(DEPLOY / "systemd" / "spotfleet-rebalance@.service")
    assert unit["Service"]["Type"] == "oneshot"
    assert "75" in unit["Service"]["SuccessExitStatus"].split()
    argv = shlex.split(unit["Service"]["ExecStart"].replace("%i", "training"))
    assert_fleet_command(argv, every=False)
    timer = configparser.ConfigParser(strict=False, interpolation=None)
    timer.read(DEPLOY / "systemd" / "spotfleet-rebalance@.timer")
    assert timer["Timer"]["OnUnitActiveSec"] and timer["Install"]["WantedBy"] == "timers.target"


def _secret_names() -> set[str]:
    return {d["metadata"]["name"] for d in manifests("secret.yaml") if d["kind"] == "Secret"}


def test_kubernetes_cronjob_runs_one_pass_at_a_time():
    (job,) = manifests("cronjob.yaml")
    assert (job["apiVersion"], job["kind"]) == ("batch/v1", "CronJob")
    assert all(CRON_FIELD.match(f) for f in job["spec"]["schedule"].split())
    assert job["spec"]["concurrencyPolicy"] == "Forbid"
    (container,) = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    assert_fleet_command(container["command"], every=False)
    assert {e["secretRef"]["name"] for e in container["envFrom"]} <= _secret_names()


def test_kubernetes_deployment_loops_with_metrics_and_health_probe():
    (dep,) = manifests("deployment.yaml")
    assert (dep["apiVersion"], dep["kind"]) == ("apps/v1", "Deployment")
    assert dep["spec"]["replicas"] == 1
    pod = dep["spec"]["template"]
    assert dep["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    (container,) = pod["spec"]["containers"]
    argv = container["command"]
    assert_fleet_command(argv, every=True)
    port = int(argv[argv.index("--metrics-port") + 1])
    named = {p["name"]: p["containerPort"] for p in container["ports"]}
    probe = container["livenessProbe"]["httpGet"]
    assert probe["path"] == "/healthz" and named[probe["port"]] == port
    assert pod["metadata"]["annotations"]["prometheus.io/port"] == str(port)
    assert {e["secretRef"]["name"] for e in container["envFrom"]} <= _secret_names()


def test_secret_carries_the_shared_state_url():
    (secret,) = manifests("secret.yaml")
    assert secret["stringData"]["SPOTFLEET_STATE"].startswith("postgresql://")


@pytest.mark.parametrize(
    "argv",
    [
        ["fleet", "rebalance", "training", "--every"],
        ["fleet", "rebalance"],
        ["fleet", "rebalance", "training", "--metrics-port", "x"],
    ],
)
def test_the_checker_rejects_broken_commands(argv):
    with pytest.raises(click.UsageError):
        assert_fleet_command(argv, every=False)
