"""The Lambda Cloud adapter (``pip install 'spotfleet[lambda]'``): REST over httpx, registered as ``lambda``.

The package is ``providers.lambda_cloud`` because ``lambda`` is a Python keyword. Lambda
publishes no official Python SDK. ``$SPOTFLEET_LAMBDA_URL`` points the adapter at another
server (default https://cloud.lambda.ai); the key comes from ``$LAMBDA_API_KEY`` or
``~/.lambda_cloud/lambda_keys``. On-demand only: nodes get no interruption notice (the agent
runs with ``--cloud none``) and checkpoint to the fleet's bucket with scoped credentials.
"""

from __future__ import annotations

from providers.kit.record import ProviderRecord, on_call
from providers.lambda_cloud.settings import LambdaSettings

RECORD = ProviderRecord(
    "lambda",
    title="Lambda",
    settings=LambdaSettings,
    factory=on_call("providers.lambda_cloud.provider:from_spec"),
    check=on_call("providers.lambda_cloud.check:check"),
    extra="lambda",
    sdk_modules=("httpx", "cryptography"),
    notice_seconds=0,
    spot=False,
    zones=False,
    checkpoint_scheme="file",
    agent_cloud="none",
    pulumi_refusal="Lambda Cloud has no Pulumi provider, and its API has no declarative resources to manage",
    summary="Lambda Cloud on-demand GPU instances (capacity read live)",
)
