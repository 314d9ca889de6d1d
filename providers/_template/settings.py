"""``providers.acme`` settings in a spec: the common keys (``fleet.spec.ProviderSettings``) plus
Acme's own. A key of another provider is refused by the spec loader, naming the fix."""

from __future__ import annotations

from pydantic import Field

from fleet.spec import ProviderSettings


class AcmeSettings(ProviderSettings):
    ssh_key_name: str = Field(default="", description="Acme: the account's SSH key to put on nodes.")
