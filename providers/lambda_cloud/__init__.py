"""The Lambda Cloud adapter (``pip install 'spotfleet[lambda]'``): REST over httpx, registered as ``lambda``.

The package is ``providers.lambda_cloud`` because ``lambda`` is a Python keyword. Lambda
publishes no official Python SDK. ``$SPOTFLEET_LAMBDA_URL`` points the adapter at another
server (default https://cloud.lambda.ai); the key comes from ``$LAMBDA_API_KEY`` or
``~/.lambda_cloud/lambda_keys``.
"""

from __future__ import annotations

from fleet.spec import FleetSpec, ProviderSettings
from providers.registry import register_cloud_adapter, require_sdk

require_sdk("httpx")          # fail early, naming the extra; httpx is imported when a client is made

from providers.lambda_cloud.check import check  # noqa: E402
from providers.lambda_cloud.provider import LambdaProvider  # noqa: E402


def build(spec: FleetSpec, settings: ProviderSettings) -> LambdaProvider:
    """The adapter for ``spec``."""
    return LambdaProvider(settings)


register_cloud_adapter("lambda", build, check=check)

__all__ = ["LambdaProvider", "build"]
