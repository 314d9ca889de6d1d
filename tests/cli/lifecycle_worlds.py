"""The provider worlds ``tests/cli/test_provider_lifecycle.py`` runs its cases in: provider ->
(its world class, the fixture in tests/cli/conftest.py that starts its fake or emulator; a world
whose class takes more servers names them in ``EXTRA_FIXTURES``). Add a
provider's CLI lifecycle by adding its world here (a ``LifecycleWorld``, tests/cli/lifecycle_world.py)."""

from __future__ import annotations

from cli.aws_cli_world import AwsLifecycle
from cli.azure_world import AzureWorld
from cli.gcp_world import GcpWorld
from cli.lambda_world import LambdaWorld
from cli.lifecycle_world import LifecycleWorld
from cli.oci_world import OciWorld
from cli.runpod_world import RunPodWorld
from cli.vast_world import VastWorld

WORLDS: dict[str, tuple[type[LifecycleWorld], str]] = {
    "lambda": (LambdaWorld, "lambda_server"),
    "runpod": (RunPodWorld, "runpod_server"),
    "vast": (VastWorld, "vast_server"),
    "oci": (OciWorld, "oci_server"),
    "aws": (AwsLifecycle, "aws_cli"),  # moto behind the EC2 fault proxy
    "azure": (AzureWorld, "arm_server"),
    "gcp": (GcpWorld, "gce"),  # and fake-gcs-server: the ``gcs`` fixture
}

#: Provider -> the further fixtures its world class takes, after the first.
EXTRA_FIXTURES: dict[str, tuple[str, ...]] = {"gcp": ("gcs",)}
