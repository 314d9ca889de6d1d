"""Which GCP project the adapter works in, told from the spec, the environment and Application
Default Credentials, and where its Compute Engine calls go. Imports no adapter code and no SDK
unless ADC may name the project, so the registration record's ``preflight`` can refuse a spec
with no project before any adapter is built (``providers.registry.providers_for``)."""

from __future__ import annotations

import os

from fleet.errors import FleetError
from providers.gcp import adc
from providers.gcp.settings import GcpSettings

ENDPOINT_ENV = "SPOTFLEET_GCE_ENDPOINT"
PROJECT_ENVS = ("GOOGLE_CLOUD_PROJECT", "CLOUDSDK_CORE_PROJECT")


def endpoint_override() -> str:
    """The Compute Engine endpoint from ``SPOTFLEET_GCE_ENDPOINT`` ("" for the real API)."""
    return os.environ.get(ENDPOINT_ENV, "").rstrip("/")


def resolve_project(settings: GcpSettings) -> str:
    """The project: ``providers.gcp.project`` in the spec, else ``GOOGLE_CLOUD_PROJECT``, else the one
    Application Default Credentials name. Raises FleetError naming all three when none is set."""
    if settings.project:
        return settings.project
    for name in PROJECT_ENVS:
        if os.environ.get(name):
            return os.environ[name]
    if not endpoint_override() and adc.may_exist():
        try:
            import google.auth
            from google.auth.exceptions import DefaultCredentialsError

            try:
                _, project = google.auth.default()
            except DefaultCredentialsError:
                project = None
            if project:
                return str(project)
        except ImportError:
            pass
    raise FleetError(
        "no GCP project: set providers.gcp.project in the spec, or GOOGLE_CLOUD_PROJECT, or a "
        "default project in Application Default Credentials (gcloud config set project ...)"
    )
