"""The protocol every provider adapter implements, and the shared error classes.

Contract (checked by ``tests/contract`` for every provider):

* ``launch`` tags everything with the fleet and pool (``fleet.model.fleet_tags``) and is
  idempotent on ``request.token``: repeating a request never creates more instances.
  Partial success is normal and reported in ``LaunchResult``; a capacity shortfall is
  reported there (``error_kind="capacity"``), not raised, so the executor can try the
  next pool. Anything it half-created before failing is cleaned up before it returns.
* ``list_instances(fleet)`` returns only instances carrying that fleet's tag, found
  through the provider itself (tags/labels are the truth, not our records). An answer it
  cannot read (truncated, HTML, ``{}``, wrong types) raises ``MalformedResponseError``
  (``providers.kit.responses``), never returns ``[]``.
* ``terminate(ids)`` is idempotent: an id that is already gone is success. It never
  touches an instance that does not carry a spotfleet fleet tag.
* Throttling is retried inside the adapter (``providers.kit.retry``); only then ``RateLimitedError``.
* ``quotas()`` lists the account's launch limits (``fleet.model.Quota``: limit and current
  use per provider, region, family or accelerator and market) that the planner must keep
  within; ``[]`` where the provider has none or the API gives none. A launch over a quota
  is answered like any launch shortfall (``error_kind="quota"``) or ``QuotaExceededError``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from fleet.errors import (  # noqa: F401  (re-exported: adapters import errors from here)
    AuthError,
    InstanceNotFoundError,
    NoCapacityError,
    ProviderError,
    QuotaExceededError,
    RateLimitedError,
    TransientProviderError,
)
from fleet.model import BilledRate, Instance, LaunchRequest, LaunchResult, Offer, Quota

log = logging.getLogger(__name__)

#: Every model here is built on first use, not at import (``fleet status`` imports this module and
#: uses none of them).
_FROZEN = ConfigDict(frozen=True, defer_build=True)


class OfferQuery(BaseModel):
    """Which offers to fetch: accelerators, markets, regions (empty = all)."""

    model_config = _FROZEN

    accelerators: tuple[str, ...] = ()
    spot: bool = True
    on_demand: bool = True
    regions: tuple[str, ...] = ()


class StorageSpec(BaseModel):
    """Checkpoint storage to ensure exists: bucket/container in a region."""

    model_config = _FROZEN

    provider: str
    bucket: str
    region: str = ""
    keep_last: int = 3
    expire_days: int | None = None
    prefix: str = ""  # the fleet's prefix inside the bucket (lifecycle rules may be limited to it)
    fleet: str = ""  # the fleet the storage is for (tags, names of per-fleet resources)


class BucketRef(BaseModel):
    """A ready bucket, with the URI nodes receive (``s3://b/prefix``, ``gs://``, ``az://``, ``file://``)."""

    model_config = _FROZEN

    provider: str
    bucket: str
    uri: str
    region: str = ""


class CheckResult(BaseModel):
    """One provider's answer to ``fleet check``: can this machine use it, and if not, the fix.

    ``None`` in ``can_price`` / ``can_launch`` means "not determined" (for example the call
    that would tell was denied). ``quotas`` maps a quota name to a short human value
    (``"NVIDIA_H100_GPUS us-central1": "8 of 16 used"``). ``fix`` is one actionable line.
    ``configured`` is False when the user has not set the provider up at all (no credentials,
    key or subscription found): ``fleet check`` then says "not configured" rather than FAIL.
    Secrets are never part of a result.
    """

    model_config = _FROZEN

    provider: str
    ok: bool
    configured: bool = True
    identity: str = ""
    can_price: bool | None = None
    can_launch: bool | None = None
    quotas: dict[str, str] = {}
    detail: str = ""
    fix: str = ""


@runtime_checkable
class Provider(Protocol):
    """The required protocol: small and closed. What else a provider can do is one small protocol
    per ability below (``isinstance(provider, TearsDown)``); the facts about it that do not vary
    by instance (interruption notice, spot or not, zones) are its registration record's
    (``providers.kit.record.ProviderRecord``, ``providers.registry.record(name)``)."""

    name: str  # "aws", "gcp", ... (the local cloud simulates these names)

    def list_offers(self, query: OfferQuery) -> list[Offer]:
        """Current offers; raises ProviderError when prices cannot be fetched."""

    def launch(self, request: LaunchRequest) -> LaunchResult:
        """Create up to ``request.count`` instances; see the module contract."""

    def list_instances(self, fleet: str) -> list[Instance]:
        """Instances tagged with ``fleet`` that are not yet terminated, from the provider."""

    def terminate(self, ids: Sequence[str]) -> None:
        """Terminate these instances; gone already is success; never touches foreign ones."""

    def ensure_bucket(self, spec: StorageSpec) -> BucketRef:
        """Create (or find) the checkpoint bucket; idempotent."""

    def now(self) -> float:
        """The provider's clock in epoch seconds (simulated for the local cloud)."""


@runtime_checkable
class ReadsConsole(Protocol):
    """An optional ability: the provider keeps a console (serial port) log of its instances, so
    ``fleet logs --console`` can show a node that never got as far as the agent. Callers check
    ``isinstance(provider, ReadsConsole)``."""

    def console_output(self, instance: Instance) -> str:
        """The newest console output of ``instance`` as text ("" when the provider has none
        yet); raises ProviderError when it cannot be read. Untrusted text: escape it before
        printing."""


# ---- optional abilities: one small protocol each; callers check ``isinstance`` -----------------
@runtime_checkable
class ReportsQuotas(Protocol):
    """The account's launch quotas can be read."""

    def quotas(self) -> list[Quota]:
        """The account's launch quotas with their current use, of this provider only (``[]`` when
        unknown); raises ProviderError when the quota API fails (the planner then plans without them)."""


@runtime_checkable
class DatesEndings(Protocol):
    """The provider can tell when an instance ended; reconciling dates endings by it."""

    def ended_at(self, ids: Sequence[str]) -> dict[str, float]:
        """When these instances ended (preempted, terminated), on the provider's clock, for those
        whose end the provider can tell (others are left out)."""


@runtime_checkable
class LaunchesGroups(Protocol):
    """A round's requests of several pools go in one call (Azure scale sets)."""

    def launch_group(self, requests: Sequence[LaunchRequest]) -> list[LaunchResult]:
        """One result per request, in order, each with ``launch``'s contract except that the
        provider sizes what it creates from what exists (a crash's unfinished launches are not
        replayed); the executor calls it instead of ``launch``."""


@runtime_checkable
class TearsDown(Protocol):
    """The provider makes per-fleet resources besides instances (networks, security groups)."""

    def teardown(self, fleet: str) -> list[str]:
        """Delete what the provider made for ``fleet`` besides its instances, only what carries
        the fleet's tag; returns the names deleted; idempotent. ``fleet down`` calls it once the
        provider lists no instance of the fleet."""


@runtime_checkable
class RaisesBids(Protocol):
    """The spot price is our bid, and an outbid instance can bid again (Vast)."""

    def raise_bid(self, instance_id: str, price: float | None = None) -> float:
        """Bid again for an outbid instance of ours: ``price`` or the adapter's rule, never above
        its caps; returns the bid. Raises ProviderError (over the caps, not ours)."""


@runtime_checkable
class ReadsBilledRate(Protocol):
    """The provider can say what it charges for an instance of ours (not what its offer said):
    ``fleet.provisioning.billing`` reads it back after each launch and while reconciling, and
    records it beside the planned price."""

    def billed_rates(self, instances: Sequence[Instance]) -> dict[str, BilledRate]:
        """Instance id -> what the provider bills for it now (USD per hour, the source and the
        rental kind), for those of ``instances`` it can price (others are left out: gone, or no
        price for that SKU). Raises ProviderError when the answer cannot be read (malformed,
        truncated, refused): never guesses a rate."""


@runtime_checkable
class GrantsNodeCredentials(Protocol):
    """A checkpoint store's owner that can give nodes without a cloud identity credentials for
    the fleet's prefix only (``providers/<name>/node_credentials.py``), and take them back."""

    def grant_node_credentials(self, spec: StorageSpec) -> dict[str, str]:
        """The node environment that reaches ``spec``'s bucket under ``spec.prefix`` and nothing
        else; idempotent (a rerun finds what it made). Raises ProviderError."""

    def revoke_node_credentials(self, spec: StorageSpec) -> list[str]:
        """Delete what :meth:`grant_node_credentials` made for ``spec.fleet``; the names deleted;
        idempotent (nothing made: ``[]``)."""


@runtime_checkable
class NodesWithoutIdentity(Protocol):
    """A provider whose nodes have no cloud identity (Vast: a third party's host), so they reach the
    checkpoint store only with the scoped credentials handed over here before launching."""

    def use_node_credentials(self, env: Mapping[str, str]) -> None:
        """Give every node launched from now on ``env`` (scoped store credentials)."""


class Interruption(BaseModel):
    """A provider's notice about one instance, read from outside it (an event queue), not from the node.

    ``kind``: ``terminate``, ``stop`` or ``hibernate`` (a spot interruption is coming, with that
    action), ``rebalance`` (advice: elevated risk), or ``ended`` (the instance is stopping or
    ending now). ``at``: when the provider sent it, on its clock (0 when it did not say)."""

    model_config = _FROZEN

    instance_id: str
    kind: str
    at: float = 0.0
    region: str = ""


@runtime_checkable
class ReportsInterruptions(Protocol):
    """The provider delivers interruption notices to a queue the fleet owns (AWS: EventBridge into SQS)."""

    def poll_interruptions(self, fleet: str, regions: Sequence[str], wait_seconds: float) -> list[Interruption]:
        """Notices for ``fleet``'s instances that arrived in ``regions`` (waiting up to
        ``wait_seconds`` for the first); each is returned once. Makes the queue in a region on
        first use when the fleet opted in; ``[]`` when it did not. Raises ProviderError when a
        queue cannot be read (its notices then stay queued)."""


def account_quotas(providers: Mapping[str, Provider]) -> list[Quota]:
    """Every provider's ``quotas()``; an adapter without the ability (:class:`ReportsQuotas`), or whose quota API
    fails, contributes none (logged), so quotas never stop a plan."""
    out: list[Quota] = []
    for name, provider in providers.items():
        if not isinstance(provider, ReportsQuotas):
            continue
        try:
            out += provider.quotas()
        except ProviderError as err:
            log.warning("%s: cannot read quotas (%s); planning without them", name, err)
    return out
