"""Scoped S3 credentials for nodes without a cloud identity (issue 28, part 3): a per-fleet IAM
user whose policy reaches ``bucket/prefix/`` only, made idempotently and revoked by ``down``.

moto checks IAM policies when asked (its documented "IAM-like access control": requests are
authorised once ``INITIAL_NO_AUTH_ACTION_COUNT`` requests have passed; the server sets it through
``POST /moto-api/reset-auth``). The operator's setup runs with checks off, as the operator's
account may do everything; then every request the node's key makes is checked, through the
checkpoint store nodes use (``fleet.checkpoint.stores.s3``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import boto3
import httpx
import pytest

from fleet.checkpoint.errors import CheckpointError
from fleet.checkpoint.stores.s3 import S3Store
from providers.aws.node_credentials import KEPT_PREFIX, user_name
from providers.aws.provider import AwsProvider
from providers.aws.session import Aws
from providers.base import GrantsNodeCredentials, StorageSpec

REGION = "us-east-1"


@pytest.fixture
def moto_url(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    for name, value in {
        "AWS_ENDPOINT_URL": url,
        "AWS_ACCESS_KEY_ID": "operator-admin-key",
        "AWS_SECRET_ACCESS_KEY": "operator-admin-secret",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        monkeypatch.setenv(name, value)
    try:
        yield url
    finally:
        _checks(url, on=False)  # moto's switch is process-wide: leave it as found
        server.stop()


def _checks(url: str, *, on: bool) -> None:
    httpx.post(f"{url}/moto-api/reset-auth", content=b"0" if on else b"inf").raise_for_status()


def _node_store(url: str, env: dict[str, str], bucket: str, prefix: str) -> S3Store:
    return S3Store(bucket, prefix, {**env, "AWS_ENDPOINT_URL_S3": url, "AWS_DEFAULT_REGION": REGION})


def test_a_nodes_credentials_reach_its_fleet_prefix_and_nothing_else(moto_url: str):
    admin = boto3.client("s3", region_name=REGION, endpoint_url=moto_url)
    for bucket in ("ckpt", "elsewhere"):
        admin.create_bucket(Bucket=bucket)
    admin.put_object(Bucket="ckpt", Key="other-fleet/secret.bin", Body=b"not yours")
    provider = AwsProvider(aws=Aws())
    assert isinstance(provider, GrantsNodeCredentials)
    spec = StorageSpec(provider="aws", bucket="ckpt", prefix="alpha", fleet="alpha", region=REGION)
    env = provider.grant_node_credentials(spec)
    assert env["AWS_ACCESS_KEY_ID"] not in ("operator-admin-key",) and "operator-admin-secret" not in json.dumps(env)
    assert provider.grant_node_credentials(spec) == env  # a rerun finds the same key
    iam = boto3.client("iam", region_name=REGION, endpoint_url=moto_url)
    assert len(iam.list_access_keys(UserName=user_name("alpha"))["AccessKeyMetadata"]) == 1

    _checks(moto_url, on=True)
    mine = _node_store(moto_url, env, "ckpt", "alpha")
    assert mine.create("step-1/data", b"weights")
    assert mine.read("step-1/data") == b"weights"
    mine.delete("step-1/data")
    assert mine.read("step-1/data") is None
    for bucket, prefix, key in [
        ("ckpt", "other-fleet", "secret.bin"),
        ("ckpt", ".spotfleet", "node-credentials/alpha.json"),
        ("elsewhere", "alpha", "x"),
    ]:
        other = _node_store(moto_url, env, bucket, prefix)
        with pytest.raises(CheckpointError, match="AccessDenied"):
            other.read(key)
        with pytest.raises(CheckpointError, match="AccessDenied"):
            other.create("planted", b"x")
    node_iam = boto3.client(
        "iam",
        region_name=REGION,
        endpoint_url=moto_url,
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
    )
    with pytest.raises(iam.exceptions.ClientError, match="AccessDenied"):
        node_iam.create_access_key(UserName=user_name("alpha"))  # it cannot mint itself more
    _checks(moto_url, on=False)

    assert provider.revoke_node_credentials(spec) == [f"iam user {user_name('alpha')}"]
    assert provider.revoke_node_credentials(spec) == []  # idempotent
    assert "Contents" not in admin.list_objects_v2(Bucket="ckpt", Prefix=KEPT_PREFIX)
    _checks(moto_url, on=True)
    with pytest.raises(CheckpointError, match="InvalidAccessKeyId"):
        mine.read("step-1/data")  # revoked


def test_a_user_of_that_name_not_made_for_the_fleet_is_left_alone(moto_url: str):
    iam = boto3.client("iam", region_name=REGION, endpoint_url=moto_url)
    iam.create_user(UserName=user_name("beta"))  # someone else's, untagged
    boto3.client("s3", region_name=REGION, endpoint_url=moto_url).create_bucket(Bucket="ckpt")
    provider = AwsProvider(aws=Aws())
    spec = StorageSpec(provider="aws", bucket="ckpt", prefix="beta", fleet="beta", region=REGION)
    for call in (lambda: provider.grant_node_credentials(spec), lambda: provider.revoke_node_credentials(spec)):
        with pytest.raises(Exception, match="not made by spotfleet"):
            call()
    assert iam.get_user(UserName=user_name("beta"))["User"]["UserName"] == user_name("beta")
