"""The OCI (Oracle Cloud Infrastructure) adapter (``pip install 'spotfleet[oci]'``): the ``oci`` SDK's
Compute and Identity clients, registered as ``oci``.

The API key comes from the SDK config (``~/.oci/config``, or ``providers.oci.config_file``/
``profile``, or ``$SPOTFLEET_OCI_CONFIG``); ``$SPOTFLEET_OCI_ENDPOINT`` points both clients at
another server (the fake in tests/fakes/oci_server.py). This file is the registration record and
imports neither the SDK nor adapter code.
"""

from __future__ import annotations

from providers.kit.record import ProviderRecord, on_call
from providers.oci.settings import OciSettings

RECORD = ProviderRecord(
    "oci",
    title="OCI",
    settings=OciSettings,
    factory=on_call("providers.oci.provider:from_spec"),
    check=on_call("providers.oci.check:check"),
    extra="oci",
    sdk_modules=("oci", "cryptography"),
    notice_seconds=0,
    spot=True,
    zones=True,
    checkpoint_scheme="file",
    agent_cloud="oci",
    pulumi_refusal="spotfleet ships no Pulumi stack for OCI yet (the pulumi-oci provider is not among its "
    "dependencies); run `fleet up` for OCI pools",
    summary="OCI GPU shapes, on-demand and preemptible (VM shapes), availability domains as zones",
)
