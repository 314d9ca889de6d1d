"""The provider worlds ``tests/cli/test_provider_lifecycle.py`` runs its cases in: provider ->
(its world class, the fixture of its fake server in tests/cli/conftest.py). Add a provider's CLI
lifecycle by adding its world here (an ``ApiWorld`` subclass with the lifecycle interface)."""

from __future__ import annotations

from cli.api_world import ApiWorld
from cli.lambda_world import LambdaWorld
from cli.oci_world import OciWorld
from cli.runpod_world import RunPodWorld
from cli.vast_world import VastWorld

WORLDS: dict[str, tuple[type[ApiWorld], str]] = {
    "lambda": (LambdaWorld, "lambda_server"),
    "runpod": (RunPodWorld, "runpod_server"),
    "vast": (VastWorld, "vast_server"),
    "oci": (OciWorld, "oci_server"),
}
