"""Azure checkpoint storage through ARM, with the real azure-mgmt clients against the fake ARM server:
the account, the private container, the lifecycle rule, the node identity and its role on the
container; idempotent reruns; the refusals; VMs launched for the URI carry the identity."""

from __future__ import annotations

import base64
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))
from azure_arm import SUBSCRIPTION  # noqa: E402
from support.azure_adapter import RG, Fake  # noqa: E402

from fleet.errors import ProviderError  # noqa: E402
from fleet.model import LaunchRequest, Market, NodeConfig, fleet_tags  # noqa: E402
from providers.azure import blob_account as ba  # noqa: E402
from providers.azure.arm import Arm  # noqa: E402
from providers.azure.provider import AzureProvider  # noqa: E402
from providers.azure.settings import AzureSettings  # noqa: E402
from providers.base import OfferQuery, StorageSpec  # noqa: E402

SPEC = StorageSpec(provider="azure", bucket="af-checkpoints", region="eastus", expire_days=7, prefix="af", fleet="af")


class StorageFake(Fake):
    """The adapter tests' fake, with the storage tables at hand."""

    def storage(self) -> dict:
        return self.control("storage/state")

    def vms(self) -> list[dict]:
        return self.control("state")["vms"]


@pytest.fixture
def fake(arm_server, tmp_path) -> StorageFake:
    return StorageFake(arm_server.url, tmp_path)


def test_ensure_bucket_makes_a_private_account_container_lifecycle_identity_and_role(fake):
    ref = fake.provider().ensure_bucket(SPEC)
    account = ba.account_name(SUBSCRIPTION, RG, "af-checkpoints")
    assert ref.uri == f"az://af-checkpoints@{account}" and ref.bucket == "af-checkpoints" and ref.region == "eastus"
    st = fake.storage()
    [acct] = st["accounts"]
    assert acct["name"] == account and acct["kind"] == "StorageV2" and acct["location"] == "eastus"
    assert acct["properties"]["supportsHttpsTrafficOnly"] is True
    assert acct["properties"]["allowBlobPublicAccess"] is False and acct["properties"]["minimumTlsVersion"] == "TLS1_2"
    assert acct["tags"] == {"spotfleet:managed": "true", "spotfleet:bucket": "af-checkpoints", "spotfleet:fleet": "af"}
    [container] = st["containers"]
    assert container["name"] == "af-checkpoints" and container["properties"]["publicAccess"] == "None"
    [policy] = st["policies"]
    [rule] = policy["properties"]["policy"]["rules"]
    assert rule["definition"]["filters"]["prefixMatch"] == ["af-checkpoints/af/"]
    assert rule["definition"]["actions"]["baseBlob"]["delete"] == {"daysAfterModificationGreaterThan": 7}
    [identity] = st["identities"]
    assert identity["name"] == f"spotfleet-{account}-af-checkpoints" and identity["tags"]["spotfleet:fleet"] == "af"
    [grant] = st["role_assignments"]
    assert grant["properties"]["scope"] == container["id"]  # the container only
    assert grant["properties"]["roleDefinitionId"].endswith(f"/roleDefinitions/{ba.BLOB_CONTRIBUTOR}")
    assert grant["properties"]["principalId"] == identity["properties"]["principalId"]
    assert grant["properties"]["principalType"] == "ServicePrincipal"
    writes = st["writes"]
    assert fake.provider().ensure_bucket(SPEC) == ref  # another process, same answer
    assert fake.storage()["writes"] == writes  # and nothing written


def test_the_lifecycle_rule_follows_expire_days_and_keeps_other_rules(fake):
    provider = fake.provider(storage_account="sharedckpt")
    provider.ensure_bucket(SPEC.model_copy(update={"bucket": "one-ckpt", "prefix": "one"}))
    provider.ensure_bucket(SPEC.model_copy(update={"bucket": "two-ckpt", "prefix": "two", "expire_days": 30}))
    [policy] = fake.storage()["policies"]
    rules = {r["definition"]["filters"]["prefixMatch"][0]: r for r in policy["properties"]["policy"]["rules"]}
    assert set(rules) == {"one-ckpt/one/", "two-ckpt/two/"}
    assert (
        rules["two-ckpt/two/"]["definition"]["actions"]["baseBlob"]["delete"]["daysAfterModificationGreaterThan"] == 30
    )
    assert len(fake.storage()["role_assignments"]) == 2 and len(fake.storage()["identities"]) == 2
    provider.ensure_bucket(SPEC.model_copy(update={"bucket": "one-ckpt", "prefix": "one", "expire_days": None}))
    [policy] = fake.storage()["policies"]
    assert [r["definition"]["filters"]["prefixMatch"] for r in policy["properties"]["policy"]["rules"]] == [
        ["two-ckpt/two/"]
    ]
    provider.ensure_bucket(SPEC.model_copy(update={"bucket": "two-ckpt", "prefix": "two", "expire_days": None}))
    assert fake.storage()["policies"] == []  # no rule left: no policy


def test_refusals_name_the_fix_in_one_line(fake):
    taken = ba.account_name(SUBSCRIPTION, RG, "af-checkpoints")
    fake.control("storage/taken", {"names": [taken]})
    with pytest.raises(ProviderError) as err:  # another subscription's name
        fake.provider().ensure_bucket(SPEC)
    assert err.value.code == "storage-account-taken" and "providers.azure.storage_account" in str(err.value)
    messages = [str(err.value)]
    with pytest.raises(ProviderError) as err:
        fake.provider(storage_account="Not_Valid").ensure_bucket(SPEC)
    assert err.value.code == "invalid-storage-account"
    messages.append(str(err.value))
    with pytest.raises(ProviderError) as err:
        fake.provider().ensure_bucket(SPEC.model_copy(update={"bucket": "Bad_Name!"}))
    assert "Bad_Name!" in str(err.value)
    messages.append(str(err.value))
    # an account under our default name in our group, but not made by spotfleet
    fake.control("reset", {})
    arm = Arm(SUBSCRIPTION, fake.url, polling_interval=0)
    arm.resources.resource_groups.create_or_update(RG, {"location": "eastus"})
    arm.storage.storage_accounts.begin_create(RG, taken, ba.account_body("eastus", {})).result()
    with pytest.raises(ProviderError) as err:
        fake.provider().ensure_bucket(SPEC)
    assert err.value.code == "foreign-storage-account"
    messages.append(str(err.value))
    assert fake.storage()["containers"] == [] and fake.storage()["identities"] == []
    assert all("\n" not in m for m in messages)
    # named in the spec, the same account is the user's to use
    assert fake.provider(storage_account=taken).ensure_bucket(SPEC).uri == f"az://af-checkpoints@{taken}"


def _launch(provider: AzureProvider, uri: str, token: str = "t1"):
    offer = next(
        o for o in provider.list_offers(OfferQuery()) if o.market is Market.SPOT and o.pool.region == "westus2"
    )
    return provider.launch(
        LaunchRequest(
            fleet="af",
            offer=offer,
            count=1,
            token=token,
            tags=fleet_tags("af", offer.pool, "p1"),
            node=NodeConfig(checkpoint_uri=uri),
        )
    )


def test_vms_writing_to_the_account_carry_the_node_identity_and_its_client_id(fake):
    provider = fake.provider()
    ref = provider.ensure_bucket(SPEC)
    assert len(_launch(provider, f"{ref.uri}/af").instances) == 1
    [identity] = fake.storage()["identities"]
    [vm] = fake.vms()
    assert vm["identity"]["type"] == "UserAssigned"
    [(rid, ids)] = vm["identity"]["userAssignedIdentities"].items()
    assert rid.lower() == identity["id"].lower() and ids["clientId"] == identity["properties"]["clientId"]
    script = base64.b64decode(vm["properties"]["osProfile"]["customData"]).decode()
    assert f"{ref.uri}/af" in script and identity["properties"]["clientId"] in script and "AZURE_CLIENT_ID" in script
    with pytest.raises(ProviderError) as err:  # an account we made no identity for
        _launch(provider, "az://af-checkpoints@elsewhere/af", token="t2")
    assert err.value.code == "no-node-identity" and len(fake.vms()) == 1


def test_a_connection_string_keeps_the_container_in_its_account(fake, tmp_path):
    arm = Arm(SUBSCRIPTION, fake.url, polling_interval=0)
    provider = AzureProvider(
        AzureSettings(resource_group=RG),
        arm=arm,
        live_prices=False,
        environ={"AZURE_STORAGE_CONNECTION_STRING": "not a connection string"},
    )
    with pytest.raises(ProviderError) as err:  # the Blob API path, not ARM
        provider.ensure_bucket(SPEC)
    assert err.value.code == "bad-connection-string" and fake.storage()["accounts"] == []


def test_a_scale_set_writing_to_the_account_carries_the_node_identity(fake):
    from providers.azure.scaleset_provider import AzureScaleSetProvider

    arm = Arm(SUBSCRIPTION, fake.url, polling_interval=0)
    provider = AzureScaleSetProvider(
        AzureSettings(resource_group=RG, launch_mode="scale-set", eviction_policy="Deallocate"),
        arm=arm,
        environ={},
        cache_seconds=0,
        live_prices=False,
        home=fake.home,
    )
    ref = provider.ensure_bucket(SPEC)
    offer = next(o for o in provider.list_offers(OfferQuery()) if o.market is Market.SPOT)
    (result,) = provider.launch_group(
        [
            LaunchRequest(
                fleet="af",
                offer=offer,
                count=2,
                token="mix",
                tags=fleet_tags("af", offer.pool, "p1"),
                node=NodeConfig(checkpoint_uri=f"{ref.uri}/af"),
            )
        ]
    )
    assert len(result.instances) == 2
    [identity] = fake.storage()["identities"]
    [vmss] = fake.control("state")["scale_sets"]
    assert [k.lower() for k in vmss["identity"]["userAssignedIdentities"]] == [identity["id"].lower()]
    profile = vmss["properties"]["virtualMachineProfile"]
    assert profile["evictionPolicy"] == "Deallocate"
    script = base64.b64decode(profile["osProfile"]["customData"]).decode()
    assert identity["properties"]["clientId"] in script and f"{ref.uri}/af" in script
