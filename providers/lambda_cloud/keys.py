"""The SSH key a Lambda launch names: registered once per fleet and key, found again by its key.

A Lambda launch must name exactly one SSH key the account holds (``ssh_key_names``; without
one the launch is refused). The key is the spec's ``node.ssh_key`` or the fleet's own pair
(``providers.kit.ssh_keys``). :func:`ensure_key` returns the name of an account key with that
public key, registering it as ``spotfleet-<fleet>-<8 hex of its hash>`` when the account has
none; a key someone else registered with the same public key is used by name and never
changed. :func:`fleet_keys` lists the keys spotfleet registered for a fleet (exactly that name
shape), which teardown deletes once the fleet has no instance left.
"""

from __future__ import annotations

import hashlib
import re

from fleet.errors import ProviderError
from providers.lambda_cloud.api import LambdaApi
from providers.lambda_cloud.schemas import SSHKey


def _body(public_key: str) -> str:
    """The key type and data of a public key line (its comment does not matter)."""
    return " ".join(public_key.split()[:2])


def key_name(fleet: str, public_key: str) -> str:
    return f"spotfleet-{fleet}-{hashlib.sha256(_body(public_key).encode()).hexdigest()[:8]}"


def ensure_key(api: LambdaApi, fleet: str, public_key: str) -> str:
    """The account key name to launch ``fleet``'s nodes with (two calls at most; one when known)."""
    wanted = _body(public_key)
    for key in api.ssh_keys():
        if _body(key.public_key) == wanted:
            return key.name
    name = key_name(fleet, public_key)
    try:
        return api.add_ssh_key(name, public_key).name
    except ProviderError:
        for key in api.ssh_keys():         # another process registered it first
            if _body(key.public_key) == wanted:
                return key.name
        raise


def fleet_keys(keys: list[SSHKey], fleet: str) -> list[SSHKey]:
    """The keys spotfleet registered for ``fleet`` (named by :func:`key_name`, nothing else)."""
    shape = re.compile(rf"spotfleet-{re.escape(fleet)}-[0-9a-f]{{8}}")
    return [k for k in keys if shape.fullmatch(k.name)]
