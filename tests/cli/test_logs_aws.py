"""`fleet logs` against AWS (moto behind the EC2 proxy, backend: cloud): the node agent's real
uploader puts a node log in the fleet's S3 bucket, `fleet logs` reads it back through the same
store; `--console` reads EC2's GetConsoleOutput."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))

from cli.aws_cli_world import REGION, AwsCli  # noqa: E402

from fleet.agent.logship import LogShipper  # noqa: E402
from fleet.checkpoint.stores import open_store  # noqa: E402


def test_a_log_the_agent_uploaded_to_s3_is_what_fleet_logs_prints(aws_cli: AwsCli, tmp_path: Path):
    report = aws_cli.fleet_json("up", aws_cli.spec(), "--yes")
    assert report["ok"]
    ids = [i["InstanceId"] for i in aws_cli.ec2_instances("awsfleet")]
    node_log = tmp_path / "spotfleet-node.log"
    node_log.write_bytes(b"spotfleet: bootstrap step 1\n\x1b]0;pwned\x07job says hi\n")
    uri = "s3://awsfleet-checkpoints/awsfleet"  # what `up` handed the nodes
    shipper = LogShipper(uri, node_log, lambda: ids[0], store=open_store(uri, env=aws_cli.world.env))
    assert shipper.ship_once(final=True)

    listed = aws_cli.fleet_json("logs", "awsfleet")
    assert listed["bucket"] == uri
    assert [(m["instance"], m["size"], m["final"]) for m in listed["logs"]] == [(ids[0], node_log.stat().st_size, True)]
    shown = aws_cli.fleet("logs", "awsfleet", ids[0])
    assert shown.returncode == 0, shown.stderr
    assert "job says hi" in shown.stdout and "\x1b" not in shown.stdout and "\x07" not in shown.stdout
    assert "\\x1b]0;pwned\\x07" in shown.stdout
    assert json.loads(aws_cli.fleet("logs", "awsfleet", ids[0], "--json").stdout)["text"].startswith(
        "spotfleet: bootstrap"
    )

    nothing = aws_cli.fleet("logs", "awsfleet", ids[1])
    assert nothing.returncode == 1 and "--console" in nothing.stderr

    console = aws_cli.fleet_json("logs", "awsfleet", ids[1], "--console")
    assert console["provider"] == "aws" and "Linux version" in console["console"]
    tail = aws_cli.fleet("logs", "awsfleet", ids[1], "--console", "--tail", "1")
    assert tail.returncode == 0 and len(tail.stdout.splitlines()) == 1
    assert aws_cli.fleet("down", "awsfleet", "--yes").returncode == 0


def test_console_of_an_instance_outside_the_fleet_is_refused(aws_cli: AwsCli):
    assert aws_cli.fleet_json("up", aws_cli.spec(), "--yes")["ok"]
    theirs = aws_cli.world.direct("ec2", REGION).run_instances(
        ImageId="ami-12c6146b", InstanceType="t3.micro", MinCount=1, MaxCount=1
    )["Instances"][0]["InstanceId"]
    proc = aws_cli.fleet("logs", "awsfleet", theirs, "--console")
    assert proc.returncode == 1 and f"no instance '{theirs}' in fleet 'awsfleet'" in proc.stderr
    assert aws_cli.fleet("down", "awsfleet", "--yes").returncode == 0
