"""The AWS adapter (``backend: cloud``): EC2 Fleet launches, spot/on-demand offers, S3 checkpoints.

Its registration record (``RECORD``, listed in :mod:`providers.registry`) says it needs the ``aws`` extra
(``pip install 'spotfleet[aws]'``, boto3). boto3 is only looked for here; it is imported when the
adapter first calls AWS.
"""

from __future__ import annotations

from providers.aws.settings import AwsSettings
from providers.kit.record import ProviderRecord, on_call

RECORD = ProviderRecord(
    "aws",
    title="AWS",
    settings=AwsSettings,
    factory=on_call("providers.aws.provider:from_spec"),
    check=on_call("providers.aws.check:check"),
    extra="aws",
    sdk_modules=("boto3", "botocore"),
    notice_seconds=120,
    spot=True,
    zones=True,
    checkpoint_scheme="s3",
    agent_cloud="aws",
    pulumi_stack="stacks.aws:AwsFleet",
    summary="AWS EC2 Fleet (spot and on-demand), S3 checkpoints",
)
