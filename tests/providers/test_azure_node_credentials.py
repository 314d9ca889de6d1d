"""Scoped, revocable Blob credentials for nodes without a cloud identity (issue 28, part 3): a SAS
under the container's stored access policy, checked by Azurite on every request. The node's
connection string reaches its fleet's container and nothing else, holds no account key, and
stops working when ``down`` deletes the policy."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))
import storage_emulators as emu  # noqa: E402

from fleet.checkpoint.errors import CheckpointError  # noqa: E402
from fleet.errors import AuthError  # noqa: E402
from providers.azure.node_credentials import CONNECTION_ENV, POLICY_ID  # noqa: E402
from providers.azure.provider import AzureProvider  # noqa: E402
from providers.base import GrantsNodeCredentials, StorageSpec  # noqa: E402

SPEC = StorageSpec(provider="azure", bucket="az-checkpoints", prefix="az", fleet="az")


@pytest.fixture(scope="module")
def azurite() -> Iterator[emu.Emulator]:
    try:
        em = emu.start_azurite()
    except emu.EmulatorUnavailable as err:
        if emu.os.environ.get("CI"):
            pytest.fail(f"{err} (emulators are required when CI=true)")
        pytest.skip(str(err))
    yield em
    em.stop()


def _store(env: dict[str, str], container: str):
    from fleet.checkpoint.stores.azure import AzureStore

    return AzureStore(container, "az", env)


def test_a_nodes_sas_reaches_its_fleets_container_only_and_down_revokes_it(azurite: emu.Emulator):
    for name in ("az-checkpoints", "someone-elses"):
        azurite.bucket_uri(name)
    operator = azurite.env
    _store(operator, "someone-elses").create("az/theirs", b"not yours")
    provider = AzureProvider(environ=operator, live_prices=False)
    assert isinstance(provider, GrantsNodeCredentials)
    env = provider.grant_node_credentials(SPEC)
    conn = env[CONNECTION_ENV]
    assert "AccountKey" not in conn and emu.AZURITE_KEY not in conn and "sig=" in conn and f"si={POLICY_ID}" in conn
    mine = _store(env, "az-checkpoints")
    assert mine.create("step-1/data", b"weights") and mine.read("step-1/data") == b"weights"
    assert mine.list("step-1/") == ["step-1/data"]
    renewed = provider.grant_node_credentials(SPEC)  # a later pass renews the policy: old SAS still works
    assert mine.read("step-1/data") == b"weights" and _store(renewed, "az-checkpoints").read("step-1/data")
    theirs = _store(env, "someone-elses")
    with pytest.raises(CheckpointError):
        theirs.read("theirs")
    with pytest.raises(CheckpointError):
        theirs.create("planted", b"x")

    assert provider.revoke_node_credentials(SPEC) == [f"access policy {POLICY_ID} of container az-checkpoints"]
    assert provider.revoke_node_credentials(SPEC) == []  # idempotent
    with pytest.raises(CheckpointError):
        mine.read("step-1/data")  # every SAS under the policy is dead
    assert _store(operator, "az-checkpoints").read("step-1/data") == b"weights"  # the data is kept


def test_without_an_account_key_no_sas_is_made_and_the_fix_is_named(azurite: emu.Emulator):
    with pytest.raises(AuthError, match=CONNECTION_ENV):
        AzureProvider(environ={}, live_prices=False).grant_node_credentials(SPEC)
