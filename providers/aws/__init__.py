"""The AWS adapter (``backend: cloud``): EC2 Fleet launches, spot/on-demand offers, S3 checkpoints.

Importing this package registers it with :mod:`providers.registry`; it needs the ``aws`` extra
(``pip install 'spotfleet[aws]'``, boto3). boto3 is only looked for here; it is imported when the
adapter first calls AWS.
"""

from __future__ import annotations

from fleet.spec import FleetSpec, ProviderSettings
from providers.registry import register_cloud_adapter, require_sdk

require_sdk("boto3", "botocore")          # fail early, naming the extra

from providers.aws.check import check  # noqa: E402
from providers.aws.provider import AwsProvider  # noqa: E402


def _factory(spec: FleetSpec, settings: ProviderSettings) -> AwsProvider:
    return AwsProvider(settings)


register_cloud_adapter("aws", _factory, check=check)

__all__ = ["AwsProvider"]
