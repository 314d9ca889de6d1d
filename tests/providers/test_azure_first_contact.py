"""What a first launch into a real subscription meets, against the fake ARM server's documented
refusals: a resource group another region (or process) made first, Linux VMs that need an SSH key,
the image a node boots (one with the NVIDIA driver unless ``node.image`` says otherwise)."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))
from azure_arm import SUBSCRIPTION  # noqa: E402
from support.azure_adapter import RG, USER_KEY, _offer, _request, set_offer, set_request  # noqa: E402
from support.azure_adapter import Fake as AdapterFake  # noqa: E402
from support.azure_adapter import ScaleSetFake as Fake  # noqa: E402  (its provider() is the scale-set adapter)

from fleet.errors import ProviderError  # noqa: E402
from fleet.model import NodeConfig  # noqa: E402
from providers.azure.launch import IMAGE  # noqa: E402
from providers.kit.ssh_keys import check_public_key  # noqa: E402

A100 = "Standard_NC24ads_A100_v4"


@pytest.fixture
def fake(arm_server, tmp_path) -> Fake:
    return Fake(arm_server.url, tmp_path)


def _single(fake: Fake):
    """The single-VM adapter on the same fake and state folder (a new one: another process)."""
    return AdapterFake.provider(fake)


def _linux(vm: dict) -> dict:
    return vm["properties"]["osProfile"]["linuxConfiguration"]


# ---- the resource group -------------------------------------------------------------------------


def test_the_fake_refuses_to_move_a_group_as_arm_does(fake):
    group = f"{fake.url}/subscriptions/{SUBSCRIPTION}/resourceGroups/moved?api-version=2021-04-01"
    assert httpx.put(group, json={"location": "eastus"}).status_code == 201
    assert httpx.put(group, json={"location": "eastus"}).status_code == 200
    refused = httpx.put(group, json={"location": "westus2"})
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "InvalidResourceGroupLocation"


def test_a_group_another_process_made_meanwhile_in_its_region_is_used(fake):
    provider = _single(fake)
    fake.control("group_race", {"name": RG, "location": "eastus"})  # the rival wins between our GET and PUT
    result = provider.launch(_request(_offer(provider), 1))  # westus2
    assert len(result.instances) == 1 and not result.error_kind
    [group] = [g for g in fake.control("state")["groups"] if g["name"] == RG]
    assert group["location"] == "eastus"  # its own location, kept


# ---- SSH keys -------------------------------------------------------------------------------------


def test_the_fake_refuses_a_linux_vm_without_password_or_key_as_azure_does(fake):
    provider = _single(fake)
    provider.launch(_request(_offer(provider), 1))  # the group and network exist now
    [vm] = fake.control("state")["vms"]
    body = {
        "location": "westus2",
        "properties": {
            "hardwareProfile": {"vmSize": A100},
            "priority": "Spot",
            "storageProfile": {"imageReference": IMAGE},
            "osProfile": {
                "computerName": "bare",
                "adminUsername": "spotfleet",
                "linuxConfiguration": {"disablePasswordAuthentication": True, "ssh": {"publicKeys": []}},
            },
            "networkProfile": vm["properties"]["networkProfile"],
        },
    }
    url = f"{fake.url}/subscriptions/{SUBSCRIPTION}/resourceGroups/{RG}/providers/Microsoft.Compute/virtualMachines"
    refused = httpx.put(f"{url}/bare?api-version=2024-07-01", json=body)
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "InvalidParameter"
    assert "SSH or by user name and password" in refused.json()["error"]["message"]
    body["properties"]["osProfile"]["linuxConfiguration"]["ssh"]["publicKeys"] = [
        {"path": "/home/spotfleet/.ssh/authorized_keys", "keyData": "ssh-rsa AAAAB3NzaC1yc2E short"}
    ]
    assert httpx.put(f"{url}/bare?api-version=2024-07-01", json=body).json()["error"]["code"] == "InvalidParameter"


def test_without_node_ssh_key_every_vm_gets_the_fleets_own_key_pair(fake):
    provider = _single(fake)
    provider.launch(_request(_offer(provider), 2))
    folder = fake.home / "keys" / "alpha"
    private, public = folder / "id_rsa", (folder / "id_rsa.pub").read_text().strip()
    assert stat.S_IMODE(private.stat().st_mode) == 0o600 and stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert private.read_text().startswith("-----BEGIN OPENSSH PRIVATE KEY-----")
    assert public.startswith("ssh-rsa ") and check_public_key(public) == ""
    vms = fake.control("state")["vms"]
    assert len(vms) == 2
    for vm in vms:
        linux = _linux(vm)
        assert linux["disablePasswordAuthentication"] is True
        assert linux["ssh"]["publicKeys"] == [{"path": "/home/spotfleet/.ssh/authorized_keys", "keyData": public}]
    _single(fake).launch(_request(_offer(provider), 1, token="t2"))  # another process: the same pair
    assert (folder / "id_rsa.pub").read_text().strip() == public
    assert {_linux(v)["ssh"]["publicKeys"][0]["keyData"] for v in fake.control("state")["vms"]} == {public}
    scale_sets = fake.provider()  # scale-set mode: the same key
    (done,) = scale_sets.launch_group([set_request(set_offer(scale_sets), 1, "s1")])
    assert len(done.instances) == 1
    [vmss] = fake.sets()
    keys = vmss["properties"]["virtualMachineProfile"]["osProfile"]["linuxConfiguration"]["ssh"]["publicKeys"]
    assert [k["keyData"] for k in keys] == [public]


def test_the_specs_key_is_used_as_given_and_a_key_azure_would_refuse_is_refused_before_anything_is_made(fake):
    provider = _single(fake)
    offer = _offer(provider)
    provider.launch(_request(offer, 1, node=NodeConfig(ssh_key=USER_KEY)))
    [vm] = fake.control("state")["vms"]
    assert _linux(vm)["ssh"]["publicKeys"][0]["keyData"] == USER_KEY and not (fake.home / "keys").exists()
    for bad in ("my-ec2-keypair", "ssh-rsa AAAAB3NzaC1yc2E", "ssh-ed25519 AAAA test"):
        with pytest.raises(ProviderError) as err:
            provider.launch(_request(offer, 1, token=f"bad-{len(bad)}", node=NodeConfig(ssh_key=bad)))
        assert err.value.code == "InvalidSshKey" and "node.ssh_key" in str(err.value)
    state = fake.control("state")
    assert len(state["vms"]) == 1 and len(state["nics"]) == 1  # nothing was sent for them


# ---- the image ------------------------------------------------------------------------------------


def test_the_default_image_carries_the_gpu_driver_and_node_image_overrides_it(fake):
    provider = _single(fake)
    offer = _offer(provider)
    provider.launch(_request(offer, 1))
    [vm] = fake.control("state")["vms"]
    ref = vm["properties"]["storageProfile"]["imageReference"]
    assert (ref["publisher"], ref["offer"], ref["sku"]) == ("microsoft-dsvm", "ubuntu-hpc", "2204")
    jammy = "Canonical:0001-com-ubuntu-server-jammy:22_04-lts-gen2:latest"
    provider.launch(_request(offer, 1, token="own", node=NodeConfig(image=jammy)))
    refs = [v["properties"]["storageProfile"]["imageReference"] for v in fake.control("state")["vms"]]
    assert {
        "publisher": "Canonical",
        "offer": "0001-com-ubuntu-server-jammy",
        "sku": "22_04-lts-gen2",
        "version": "latest",
    } in refs
    gallery = (
        f"/subscriptions/{SUBSCRIPTION}/resourceGroups/img/providers/Microsoft.Compute/galleries/g/images/"
        "cuda/versions/1.0.0"
    )
    provider.launch(_request(offer, 1, token="gallery", node=NodeConfig(image=gallery)))
    assert {"id": gallery} in [
        v["properties"]["storageProfile"]["imageReference"] for v in fake.control("state")["vms"]
    ]


def test_an_image_that_is_not_one_is_refused_with_the_field_and_an_unknown_one_as_azure_answers(fake):
    provider = _single(fake)
    offer = _offer(provider)
    with pytest.raises(ProviderError) as err:
        provider.launch(_request(offer, 1, token="ami", node=NodeConfig(image="ami-0123456789abcdef0")))
    assert err.value.code == "InvalidImage" and "node.image" in str(err.value)
    assert fake.control("state")["vms"] == []
    with pytest.raises(ProviderError) as err:
        provider.launch(_request(offer, 1, token="nope", node=NodeConfig(image="nobody:no-offer:no-sku:latest")))
    assert err.value.code == "PlatformImageNotFound" and type(err.value) is ProviderError
    state = fake.control("state")
    assert state["vms"] == [] and state["nics"] == []  # the NIC made for it went too
