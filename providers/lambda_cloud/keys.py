"""The SSH key a Lambda launch names: registered once per fleet and key, found again by its key.

A Lambda launch must name exactly one SSH key the account holds (``ssh_key_names``; without
one the launch is refused). The key is the spec's ``node.ssh_key`` or the fleet's own pair
(``providers.kit.ssh_keys``). :func:`ensure_key` returns the name of an account key with that
public key, registering it as ``spotfleet-<fleet>-<8 hex of its hash>`` unless the fleet
registered it already; a key the user registered with the same public key is used by name and
never changed, but not another fleet's registration (that one goes when its fleet goes). :func:`fleet_keys` lists the keys spotfleet registered for a fleet (exactly that name
shape), which teardown deletes once the fleet has no instance left.
"""

from __future__ import annotations

import hashlib
import re

from fleet.errors import ProviderError
from providers.lambda_cloud.api import LambdaApi
from providers.lambda_cloud.schemas import SSHKey

#: The names :func:`key_name` gives, whatever the fleet.
_SPOTFLEET = re.compile(r"spotfleet-[a-z][a-z0-9-]*-[0-9a-f]{8}")


def _body(public_key: str) -> str:
    """The key type and data of a public key line (its comment does not matter)."""
    return " ".join(public_key.split()[:2])


def key_name(fleet: str, public_key: str) -> str:
    return f"spotfleet-{fleet}-{hashlib.sha256(_body(public_key).encode()).hexdigest()[:8]}"


def _usable(keys: list[SSHKey], fleet: str, public_key: str) -> str:
    """The name of a key in ``keys`` that ``fleet`` may launch with: its own registration of
    ``public_key``, else one with that public key that no spotfleet fleet registered (the user's:
    another fleet's registration is deleted with that fleet); "" when there is none."""
    ours, wanted = key_name(fleet, public_key), _body(public_key)
    if any(k.name == ours for k in keys):
        return ours
    return next((k.name for k in keys if _body(k.public_key) == wanted and not _SPOTFLEET.fullmatch(k.name)), "")


def ensure_key(api: LambdaApi, fleet: str, public_key: str) -> str:
    """The account key name to launch ``fleet``'s nodes with (one call when it exists, two or
    three when it is registered now)."""
    found = _usable(api.ssh_keys(), fleet, public_key)
    if found:
        return found
    try:
        return api.add_ssh_key(key_name(fleet, public_key), public_key).name
    except ProviderError:
        found = _usable(api.ssh_keys(), fleet, public_key)  # another process registered it first
        if found:
            return found
        raise


def fleet_keys(keys: list[SSHKey], fleet: str) -> list[SSHKey]:
    """The keys spotfleet registered for ``fleet`` (named by :func:`key_name`, nothing else)."""
    shape = re.compile(rf"spotfleet-{re.escape(fleet)}-[0-9a-f]{{8}}")
    return [k for k in keys if shape.fullmatch(k.name)]
