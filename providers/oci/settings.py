"""``providers.oci`` settings: where in the tenancy nodes go, and which API key signs the calls.

``compartment_id``, ``subnet_id`` and ``image_id`` are OCIDs the tenancy already has (the fleet
makes no network: a subnet with a route out, a NAT or internet gateway, is the operator's, as
the image is: a GPU platform image, ``Oracle-Linux-8.x-Gen2-GPU-*``, or one of their own).
``config_file``/``profile`` pick the API key (``~/.oci/config``, profile ``DEFAULT``). One adapter
serves one region, the first of ``regions`` (default: the profile's); the region's availability
domains are its zones.
"""

from __future__ import annotations

from pydantic import Field

from fleet.spec import ProviderSettings


class OciSettings(ProviderSettings):
    compartment_id: str = Field(
        default="", description="OCI: the compartment OCID instances are launched in (and listed from)."
    )
    subnet_id: str = Field(default="", description="OCI: the subnet OCID of every node's VNIC (in the region).")
    image_id: str = Field(
        default="",
        description="OCI: the image OCID nodes boot (a GPU image); node.image overrides it when it is an image OCID.",
    )
    config_file: str = Field(default="", description="OCI: the SDK config file (default ~/.oci/config).")
    profile: str = Field(default="", description="OCI: the profile in the config file (default DEFAULT).")

    @property
    def region(self) -> str:
        """The one region the adapter serves: the first of ``regions``, else "" (the profile's)."""
        return self.regions[0] if self.regions else ""

    def missing(self) -> list[str]:
        """The OCIDs a launch needs that are not set, as ``providers.oci.<field>`` paths."""
        wanted = {"compartment_id": self.compartment_id, "subnet_id": self.subnet_id, "image_id": self.image_id}
        return [f"providers.oci.{name}" for name, value in wanted.items() if not value]
