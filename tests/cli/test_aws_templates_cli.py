"""Launch templates after a `fleet up` killed right after CreateFleet, before its cleanup: the
template (whose user data holds the node's environment) is tagged with the fleet, a rerun removes
the ones CreateFleet already used, and `fleet down` removes every one the fleet made, never another's."""

from __future__ import annotations

import base64

from cli.aws_cli_world import REGION, AwsCli, aws_world


def _templates(aws_cli: AwsCli) -> list[dict]:
    return aws_cli.world.direct("ec2", REGION).describe_launch_templates()["LaunchTemplates"]


def _theirs(aws_cli: AwsCli) -> str:
    ec2 = aws_cli.world.direct("ec2", REGION)
    return ec2.create_launch_template(
        LaunchTemplateName="their-template",
        LaunchTemplateData={"ImageId": aws_world.MOTO_AMI},
        TagSpecifications=[{"ResourceType": "launch-template", "Tags": [{"Key": "team", "Value": "theirs"}]}],
    )["LaunchTemplate"]["LaunchTemplateName"]


def test_down_removes_the_template_a_kill_after_create_fleet_left(aws_cli: AwsCli):
    theirs = _theirs(aws_cli)
    crashed = aws_cli.fleet(
        "up", aws_cli.spec(), "--yes", SPOTFLEET_TEST_CRASH_AT="aws-fleet-created", SECRET_FOR_NODES="s3cr3t"
    )
    assert crashed.returncode == 137, crashed.stderr
    left = [t for t in _templates(aws_cli) if t["LaunchTemplateName"] != theirs]  # one per pool launching then
    assert left and aws_cli.ec2_instances("awsfleet")  # CreateFleet went through
    for template in left:
        tags = {t["Key"]: t["Value"] for t in template["Tags"]}
        assert tags["spotfleet:fleet"] == "awsfleet" and tags["spotfleet:token"]
    data = aws_cli.world.direct("ec2", REGION).describe_launch_template_versions(
        LaunchTemplateName=left[0]["LaunchTemplateName"]
    )["LaunchTemplateVersions"][0]["LaunchTemplateData"]
    assert "fleet" in base64.b64decode(data["UserData"]).decode()  # the node's bootstrap, left
    down = aws_cli.fleet("down", "awsfleet", "--yes")
    assert down.returncode == 0, down.stderr
    assert [t["LaunchTemplateName"] for t in _templates(aws_cli)] == [theirs]  # ours gone, theirs kept
    assert aws_cli.alive_by_pool("awsfleet") == {}


def test_a_rerun_after_the_kill_converges_and_leaves_no_template(aws_cli: AwsCli):
    theirs = _theirs(aws_cli)
    spec = aws_cli.spec()
    crashed = aws_cli.fleet("up", spec, "--yes", SPOTFLEET_TEST_CRASH_AT="aws-fleet-created")
    assert crashed.returncode == 137, crashed.stderr
    rerun = aws_cli.fleet_json("up", spec, "--yes")
    assert rerun["ok"] and aws_cli.alive_by_pool("awsfleet") == rerun["desired"]
    assert len(aws_cli.ec2_instances("awsfleet")) == sum(rerun["desired"].values())  # nothing launched twice
    assert [t["LaunchTemplateName"] for t in _templates(aws_cli)] == [theirs]  # the killed run's went too
    aws_cli.fleet_json("down", "awsfleet", "--yes")
    assert [t["LaunchTemplateName"] for t in _templates(aws_cli)] == [theirs]
