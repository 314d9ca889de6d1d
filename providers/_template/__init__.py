"""Template adapter: copy ``providers/_template`` to ``providers/<name>/``, rename ``acme``, and
follow docs/adding-a-provider.md. Not registered (``providers.registry.PACKAGES`` does not list it);
``tests/unit/test_provider_records.py`` keeps it importable and complete.

This file is the provider's registration record and nothing else: it imports no SDK and no
adapter module at import time (every spec reads the records).
"""

from __future__ import annotations

from providers._template.settings import AcmeSettings
from providers.kit.record import ProviderRecord, on_call

RECORD = ProviderRecord(
    "acme",
    title="Acme Cloud",
    settings=AcmeSettings,
    factory=on_call("providers._template.provider:from_spec"),
    check=on_call("providers._template.check:check"),
    extra="acme",
    sdk_modules=("httpx",),
    notice_seconds=0,
    spot=False,
    zones=False,
    checkpoint_scheme="s3",
    pulumi_refusal="Acme has no Pulumi provider",
    summary="Acme Cloud on-demand GPU instances (template)",
)
