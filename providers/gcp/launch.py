"""Launching VMs for one request: deterministic names, requestIds from the token, one wait.

Idempotency has two parts, both derived from ``request.token``:

* names: VM ``i`` of a request is ``sf-<fleet hash>-<token hash>-<i>`` (:func:`instance_names`),
  labelled with the token hash, so a rerun first finds what the token already made
  (``instances.list`` by label) and only asks for the names still missing; a taken name is
  success (409 ``alreadyExists``), never a second VM;
* requestIds: a UUID from the token and the names asked for (:func:`request_id`). GCE answers a
  repeated requestId with the first operation and creates nothing, so replaying a finished
  request resurrects no VM that was deleted since, while a refused call (429, 403, 5xx: no
  operation) can be replayed until it succeeds.

A request with more than one missing VM uses ``bulkInsert`` (``perInstanceProperties`` with those
names, ``minCount=1`` so a partial fill is kept); one VM uses ``insert``. Operation errors and a
short bulk fill become a capacity shortfall in the result; quota, auth, throttling (after
:meth:`GceApi.call`'s retries) and server faults are raised. The same token with other
parameters is refused (``spotfleet-launch`` fingerprint in metadata).

A request with ``interconnect`` puts its VMs under that compact placement policy
(``providers.gcp.interconnect``: made before the VMs when missing, named in each VM's
``resourcePolicies``, deleted by ``GcpProvider.teardown``).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from fleet.bootstrap import boot_for, render
from fleet.errors import NoCapacityError, ProviderError
from fleet.model import TAG_FLEET, TAG_PLAN, LaunchRequest, LaunchResult, Market, fleet_tags
from providers.gcp import errors
from providers.gcp.instances import (
    LABEL_FLEET,
    LABEL_PLAN,
    LABEL_POOL,
    LABEL_TOKEN,
    META_LAUNCH,
    META_OFFER,
    META_TAGS,
    label_value,
    to_instance,
)
from providers.gcp.offers import parse_instance_type

#: The boot image when the spec names none: a Deep Learning VM image family with NVIDIA drivers.
DEFAULT_IMAGE = "projects/deeplearning-platform-release/global/images/family/common-cu124-debian-11-py310"
BOOT_DISK_GB = 200
#: Concurrent single inserts when bulkInsert is off.
INSERT_WORKERS = 8
_NAMESPACE = uuid.UUID("5b1f4c1e-9a7d-4c3e-8f0e-2b7f6a9d1c42")


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()[:16]


def instance_names(fleet: str, token: str, count: int) -> list[str]:
    """Deterministic VM names of a request: the fleet's and the token's hashes, then the index."""
    f = hashlib.sha256(fleet.encode()).hexdigest()[:6]
    return [f"sf-{f}-{token_hash(token)[:12]}-{i:03d}" for i in range(count)]


def fleet_name_prefix(fleet: str) -> str:
    """The name prefix every VM of ``fleet`` carries (finds deleted VMs in operation logs)."""
    return f"sf-{hashlib.sha256(fleet.encode()).hexdigest()[:6]}-"


def request_id(token: str, *parts: str) -> str:
    """A requestId (GCE wants a UUID) from the token and what the call asks for."""
    return str(uuid.uuid5(_NAMESPACE, "|".join([token, *parts])))


def fingerprint(request: LaunchRequest, tags: dict[str, str]) -> str:
    body = [request.fleet, request.offer.pool.id, request.count, sorted(tags.items()), request.max_price]
    return hashlib.sha256(json.dumps(body, default=str).encode()).hexdigest()[:16]


@dataclass
class Launcher:
    api: Any
    bulk: bool = True
    termination_action: str = "DELETE"

    def launch(self, request: LaunchRequest) -> LaunchResult:
        pool = request.offer.pool
        zone, region = pool.zone, pool.region
        tags = {**request.tags, **fleet_tags(request.fleet, pool, request.tags.get(TAG_PLAN, ""))}
        print_ = fingerprint(request, tags)
        names = instance_names(request.fleet, request.token, request.count)
        mine = self._made_by(zone, request.token)
        for inst in mine.values():
            if _metadata(inst).get(META_LAUNCH) != print_:
                raise ProviderError(
                    "gcp",
                    f"launch token {request.token!r} was already used with different parameters",
                    region=region,
                    code="REQUEST_PARAMETER_MISMATCH",
                )
        missing = [n for n in names if n not in mine]
        shortfall: ProviderError | None = None
        if missing:
            resource = self._resource(request, tags, print_)
            if request.interconnect:
                from providers.gcp import interconnect  # it uses this module's request_id

                resource["resource_policies"] = [
                    interconnect.ensure(self.api, region, request.interconnect, request.fleet)
                ]
            if self.bulk and len(missing) > 1:
                shortfall = self._bulk(zone, request.token, missing, resource)
            else:
                shortfall = self._singly(zone, request.token, missing, resource)
            mine = self._made_by(zone, request.token)
        instances = tuple(to_instance(mine[n], zone) for n in names if n in mine)
        if len(instances) < request.count and shortfall is None:
            shortfall = NoCapacityError(
                "gcp",
                f"{len(instances)} of {request.count} {pool.instance_type} created in {zone}",
                region=region,
                code="ZONE_RESOURCE_POOL_EXHAUSTED",
            )
        if shortfall is not None and len(instances) < request.count:
            if not isinstance(shortfall, NoCapacityError):
                raise shortfall
            return LaunchResult(
                instances=instances,
                error_code=shortfall.code,
                error_message=shortfall.message,
                error_kind=errors.kind_of(shortfall),
            )
        return LaunchResult(instances=instances)

    # ---- calls ----------------------------------------------------------------------------------
    def _made_by(self, zone: str, token: str) -> dict[str, Any]:
        """The live VMs this token created in ``zone``, by name."""
        pages = self.api.pages(
            self.api.instances.list,
            kind="compute#instanceList",
            region=zone.rsplit("-", 1)[0],
            what=f"list VMs of a launch in {zone}",
            request={
                "project": self.api.project,
                "zone": zone,
                "filter": f'labels.{LABEL_TOKEN} = "{token_hash(token)}"',
            },
        )
        return {i.name: i for page in pages for i in page.items if i.status not in ("STOPPING", "TERMINATED")}

    def _bulk(self, zone: str, token: str, names: list[str], resource: dict[str, Any]) -> ProviderError | None:
        c = self.api.compute
        props = {k: v for k, v in resource.items() if k != "name"}
        props["machine_type"] = props["machine_type"].rsplit("/", 1)[-1]  # bulkInsert takes a bare name
        if props.get("resource_policies"):  # and bare policy names
            props["resource_policies"] = [p.rsplit("/", 1)[-1] for p in props["resource_policies"]]
        body = c.BulkInsertInstanceResource(
            count=len(names),
            min_count=1,
            instance_properties=c.InstanceProperties(**props),
            per_instance_properties={n: c.BulkInsertInstanceResourcePerInstanceProperties(name=n) for n in names},
        )
        op = self.api.call(
            self.api.instances.bulk_insert_unary,
            region=zone.rsplit("-", 1)[0],
            request={
                "project": self.api.project,
                "zone": zone,
                "request_id": request_id(token, "bulk", *names),
                "bulk_insert_instance_resource_resource": body,
            },
        )
        return self._outcome(zone, op)

    def _singly(self, zone: str, token: str, names: list[str], resource: dict[str, Any]) -> ProviderError | None:
        def one(name: str) -> ProviderError | None:
            body = self.api.compute.Instance(**{**resource, "name": name})
            try:
                op = self.api.call(
                    self.api.instances.insert_unary,
                    region=zone.rsplit("-", 1)[0],
                    request={
                        "project": self.api.project,
                        "zone": zone,
                        "instance_resource": body,
                        "request_id": request_id(token, name),
                    },
                )
            except ProviderError as err:
                if err.code == "alreadyExists":
                    return None
                raise
            return self._outcome(zone, op)

        with ThreadPoolExecutor(max_workers=max(1, min(INSERT_WORKERS, len(names)))) as pool:
            outcomes = list(pool.map(one, names))
        return next((o for o in outcomes if o is not None), None)

    def _outcome(self, zone: str, op: Any) -> ProviderError | None:
        """The error a finished operation reports, as our error (None when it succeeded)."""
        op = self.api.wait(zone, op)
        if not op.error or not op.error.errors:
            return None
        found = [(e.code, e.message) for e in op.error.errors]
        return errors.from_operation(found, region=zone.rsplit("-", 1)[0], status=op.http_error_status_code or 0)

    # ---- the VM ---------------------------------------------------------------------------------
    def _resource(self, request: LaunchRequest, tags: dict[str, str], print_: str) -> dict[str, Any]:
        """Keyword arguments of ``compute_v1.Instance`` for every VM of the request (no name)."""
        c = self.api.compute
        pool = request.offer.pool
        machine, accel, count = parse_instance_type(pool.instance_type)
        spot = pool.market is Market.SPOT
        scheduling = c.Scheduling(
            on_host_maintenance="TERMINATE",
            automatic_restart=not spot,
            provisioning_model="SPOT" if spot else "STANDARD",
        )
        if spot:
            scheduling.instance_termination_action = self.termination_action
        offer = {
            "accelerator": request.offer.accelerator,
            "gpus": request.offer.gpus,
            "price": request.offer.price_per_hour,
        }
        metadata = {
            "startup-script": render(boot_for("gcp", request)),
            META_TAGS: json.dumps(tags, sort_keys=True),
            META_OFFER: json.dumps(offer, sort_keys=True),
            META_LAUNCH: print_,
            "install-nvidia-driver": "True",
        }
        if request.node.ssh_key:
            metadata["ssh-keys"] = f"spotfleet:{request.node.ssh_key}"
        resource: dict[str, Any] = {
            "machine_type": f"zones/{pool.zone}/machineTypes/{machine}",
            "labels": labels_for(request, tags),
            "metadata": c.Metadata(items=[c.Items(key=k, value=v) for k, v in metadata.items()]),
            "scheduling": scheduling,
            "disks": [
                c.AttachedDisk(
                    boot=True,
                    auto_delete=True,
                    initialize_params=c.AttachedDiskInitializeParams(
                        source_image=request.node.image or DEFAULT_IMAGE, disk_size_gb=BOOT_DISK_GB
                    ),
                )
            ],
            "network_interfaces": [
                c.NetworkInterface(
                    network="global/networks/default",
                    access_configs=[c.AccessConfig(name="External NAT", type_="ONE_TO_ONE_NAT")],
                )
            ],
            "service_accounts": [
                c.ServiceAccount(email="default", scopes=["https://www.googleapis.com/auth/cloud-platform"])
            ],
        }
        if accel:
            resource["guest_accelerators"] = [
                c.AcceleratorConfig(
                    accelerator_type=f"zones/{pool.zone}/acceleratorTypes/{accel}", accelerator_count=count
                )
            ]
        return resource


def labels_for(request: LaunchRequest, tags: dict[str, str]) -> dict[str, str]:
    """GCE labels: the fleet, pool hash, plan and token hash, then the user's tags that fit label rules."""
    labels = {
        LABEL_FLEET: label_value(request.fleet),
        LABEL_POOL: request.offer.pool.short_hash,
        LABEL_TOKEN: token_hash(request.token),
    }
    if tags.get(TAG_PLAN):
        labels[LABEL_PLAN] = label_value(tags[TAG_PLAN])
    for key, value in tags.items():
        if key.startswith("spotfleet:") or key == TAG_FLEET:
            continue
        k = label_value(key)
        if k and k[0].isalpha() and k not in labels and len(labels) < 64:
            labels[k] = label_value(value)
    return labels


def _metadata(inst: Any) -> dict[str, str]:
    return {item.key: item.value for item in inst.metadata.items}
