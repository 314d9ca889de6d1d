"""``az://container@account`` checkpoints signed in with a token, the way a node's managed identity does.

Azurite serves Blob over HTTPS with ``--oauth basic`` (tests/fakes/azurite_oauth.py: it checks the
bearer token's issuer, audience and lifetime); the token comes from azure.identity's real
``DefaultAzureCredential``, whose managed-identity step asks the fake IMDS
(tests/fakes/metadata.py ``FakeAzure``, reached through ``AZURE_POD_IDENTITY_AUTHORITY_HOST``) for
the identity ``AZURE_CLIENT_ID`` names. The store is opened from the URI alone, as on a node.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))
import storage_emulators as emu  # noqa: E402
from metadata import FakeAzure  # noqa: E402

from fleet.checkpoint import CheckpointManager  # noqa: E402
from fleet.checkpoint.errors import CheckpointError  # noqa: E402
from fleet.checkpoint.stores import open_store  # noqa: E402
from fleet.checkpoint.stores.azure import account_url  # noqa: E402

CLIENT_ID = "6e3e1c2a-0000-4000-8000-00000000c11e"


@pytest.fixture(scope="module")
def azurite() -> Iterator[object]:
    from azurite_oauth import start_azurite_oauth

    try:
        server = start_azurite_oauth()
    except emu.EmulatorUnavailable as err:
        if emu.in_ci():
            pytest.fail(str(err))
        pytest.skip(str(err))
    from azure.storage.blob import BlobServiceClient

    BlobServiceClient.from_connection_string(
        server.connection_string, connection_verify=str(server.ca)
    ).create_container("node-ckpt")
    yield server
    server.stop()


@pytest.fixture
def node(azurite, monkeypatch) -> Iterator[tuple[FakeAzure, dict[str, str]]]:
    """A node's process environment: no keys, only the identity's client id and the IMDS."""
    imds = FakeAzure().start()
    imds.assign_identity(CLIENT_ID)
    import os

    for name in list(os.environ):
        if name.startswith(("AZURE_", "IDENTITY_", "MSI_", "SPOTFLEET_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AZURE_POD_IDENTITY_AUTHORITY_HOST", imds.url)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(azurite.ca))
    monkeypatch.setenv("AZURE_CLIENT_ID", CLIENT_ID)
    monkeypatch.setenv("SPOTFLEET_AZURE_BLOB_ENDPOINT", azurite.endpoint)
    yield imds, dict(os.environ)
    imds.stop()


def test_checkpoints_round_trip_with_a_managed_identity_token(node):
    imds, env = node
    uri = f"az://node-ckpt@{emu.AZURITE_ACCOUNT}/run-1"
    manager = CheckpointManager(uri, keep_last=2)
    manager.save({"weights": b"x" * 300_000}, step=10)
    manager.save({"weights": b"y" * 1000}, step=20)
    state, info = manager.load_latest()
    assert info.step == 20 and state == {"weights": b"y" * 1000}
    store = open_store(uri)
    assert store.read("missing") is None and store.create("marker", b"1") and not store.create("marker", b"2")
    tokens = imds.seen("GET", "/metadata/identity/oauth2/token")
    assert tokens and {t.query.get("client_id") for t in tokens} == {CLIENT_ID}
    assert {t.query["resource"] for t in tokens} == {"https://storage.azure.com"}


def test_azurite_checks_the_token_so_a_wrong_one_is_a_clear_error(node):
    imds, _ = node
    imds.audience = "https://management.azure.com"  # a token for another service
    with pytest.raises(CheckpointError) as err:
        open_store(f"az://node-ckpt@{emu.AZURITE_ACCOUNT}/run-2").list("")
    assert "az://node-ckpt@" in str(err.value) and "failed to authenticate" in str(err.value)
    assert "\n" not in str(err.value)


def test_the_account_endpoint_and_what_the_uri_needs():
    assert account_url("acct1", {}) == "https://acct1.blob.core.windows.net"
    assert (
        account_url("acct1", {"SPOTFLEET_AZURE_BLOB_ENDPOINT": "https://127.0.0.1:10000/"})
        == "https://127.0.0.1:10000/acct1"
    )
    assert (
        account_url("acct1", {"SPOTFLEET_AZURE_BLOB_ENDPOINT": "https://{account}.blob.local"})
        == "https://acct1.blob.local"
    )
    with pytest.raises(CheckpointError) as err:
        open_store("az://ckpt/run", env={})
    assert "az://container@account/prefix" in str(err.value)
