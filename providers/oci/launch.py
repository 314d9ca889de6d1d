"""What one OCI LaunchInstance carries (pure but for the SDK's model classes).

:func:`launch_details` builds ``LaunchInstanceDetails``
(https://docs.oracle.com/iaas/api/#/en/iaas/20160918/datatypes/LaunchInstanceDetails): the shape in
one availability domain, the image and subnet of the settings, freeform tags naming the fleet
(``providers.oci.instances.freeform_tags``), a display name, and ``metadata``:

* ``user_data``: the fleet's node bootstrap (``fleet.bootstrap``), base64 as cloud-init reads it
  on OCI's platform images, with the scoped store credentials the fleet granted (an OCI node has
  no identity for the fleet's bucket: ``fleet.provisioning.node_credentials``) and the store's
  non-secret settings;
* ``ssh_authorized_keys``: the spec's ``node.ssh_key``, else the fleet's own key
  (``providers.kit.ssh_keys``).

A preemptible pool adds ``preemptibleInstanceConfig`` with ``preemptionAction`` TERMINATE and
``preserveBootVolume`` false (a reclaimed node leaves no billed volume). OCI caps the metadata at
32,000 bytes; a bootstrap over it is refused here, before anything is sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from fleet.bootstrap import boot_for, render_base64
from fleet.errors import ProviderError
from fleet.model import LaunchRequest, Market, fleet_tags
from providers.oci.instances import freeform_tags

if TYPE_CHECKING:
    import oci

#: OCI's limit on an instance's metadata (all keys and values together).
METADATA_LIMIT = 32_000


def image_for(request: LaunchRequest, default_image: str) -> str:
    """The image OCID to boot: the spec's ``node.image`` when it is an OCI image OCID, else the settings'."""
    image = request.node.image
    return image if image.startswith("ocid1.image.") else default_image


def display_name(request: LaunchRequest, slot: int) -> str:
    return f"spotfleet-{request.fleet}-{request.offer.pool.short_hash}-{slot}"[:255]


def node_metadata(request: LaunchRequest, ssh_key: str, secret_env: Mapping[str, str]) -> dict[str, str]:
    """``metadata`` for ``request``'s nodes; ProviderError when it exceeds OCI's limit."""
    meta = {"user_data": render_base64(boot_for("oci", request, secret_env)), "ssh_authorized_keys": ssh_key}
    size = sum(len(k) + len(v) for k, v in meta.items())
    if size > METADATA_LIMIT:
        raise ProviderError(
            "oci",
            f"the node start-up script is {size} bytes with its metadata, over OCI's "
            f"{METADATA_LIMIT}-byte limit; shorten node.startup or node.env",
            code="metadata-too-large",
        )
    return meta


def launch_details(
    request: LaunchRequest,
    *,
    zone: str,
    slot: int,
    compartment_id: str,
    subnet_id: str,
    image_id: str,
    metadata: Mapping[str, str],
) -> oci.core.models.LaunchInstanceDetails:
    """The LaunchInstanceDetails of slot ``slot`` of ``request`` in availability domain ``zone``."""
    from oci.core import models

    pool = request.offer.pool
    preemptible = None
    if pool.market is Market.SPOT:
        preemptible = models.PreemptibleInstanceConfigDetails(
            preemption_action=models.TerminatePreemptionAction(type="TERMINATE", preserve_boot_volume=False)
        )
    return models.LaunchInstanceDetails(
        availability_domain=zone,
        compartment_id=compartment_id,
        shape=pool.instance_type,
        display_name=display_name(request, slot),
        create_vnic_details=models.CreateVnicDetails(subnet_id=subnet_id),
        source_details=models.InstanceSourceViaImageDetails(source_type="image", image_id=image_id),
        freeform_tags=freeform_tags(
            {**request.tags, **fleet_tags(request.fleet, pool)}, request.token, slot, request.offer.price_per_hour
        ),
        metadata=dict(metadata),
        preemptible_instance_config=preemptible,
    )
