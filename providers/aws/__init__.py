"""The AWS adapter (``backend: cloud``): EC2 Fleet launches, spot/on-demand offers, S3 checkpoints.

Importing this package registers it with :mod:`providers.registry`; it needs the ``aws`` extra
(``pip install 'spotfleet[aws]'``, boto3).
"""

from __future__ import annotations

from fleet.spec import FleetSpec, ProviderSettings
from providers.aws.check import check
from providers.aws.provider import AwsProvider
from providers.registry import register_cloud_adapter


def _factory(spec: FleetSpec, settings: ProviderSettings) -> AwsProvider:
    return AwsProvider(settings)


register_cloud_adapter("aws", _factory, check=check)

__all__ = ["AwsProvider"]
