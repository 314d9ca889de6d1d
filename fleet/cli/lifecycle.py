"""Plumbing shared by ``fleet up/status/down/history/list/repair``: the store, a fleet's
providers and spec, confirmation, and the small formatters their tables use."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import click

from fleet.cli.app import App
from fleet.errors import FleetError, FleetLockedError, StateError
from fleet.model import PlanDigest
from fleet.private import private_dir
from fleet.provisioning.reconcile import Observation, SyncResult, observe, sync
from fleet.recorded_spec import where_recorded
from fleet.state import FleetRecord, StateStore, UnwritableStoreError, open_store
from fleet.state.db import path_from_url
from providers.base import Provider

if TYPE_CHECKING:
    from fleet.spec import FleetSpec

#: Exit status when a fleet ends short of its plan (matches ``fleet plan`` for infeasible specs).
EXIT_SHORT = 3


def store_exists(app: App) -> bool:
    """Whether a store may already exist at ``app.state_url`` without creating one (a database
    server is asked when opened; a file is looked for)."""
    from fleet.state.db import is_postgres_url

    return is_postgres_url(app.state_url) or path_from_url(app.state_url).exists()


def store_of(app: App, *, create: bool = False) -> StateStore:
    """The state store at ``app.state_url``; missing -> StateError unless ``create``. The spotfleet
    home holding it (``$SPOTFLEET_HOME``, ``~/.spotfleet``) is made private (0700) on the way."""
    from fleet.state.db import is_postgres_url

    if (
        not is_postgres_url(app.state_url)
        and app.home.is_dir()
        and path_from_url(app.state_url).parent.resolve() == app.home.resolve()
    ):
        private_dir(app.home)
    return open_store(app.state_url, create=create)


def readable_store(app: App) -> tuple[StateStore, str]:
    """The store for a command that must work when it cannot be written (``down``, ``status``):
    ``(store, "")``, or the store opened read-only and why it cannot be written."""
    try:
        return store_of(app), ""
    except UnwritableStoreError as err:
        return open_store(app.state_url, create=False, read_only=True), str(err)


def spec_of(record: FleetRecord) -> FleetSpec | None:
    """The spec recorded with a fleet, ``None`` when it was rebuilt without one."""
    from pydantic import ValidationError

    from fleet.spec import FleetSpec

    if not record.spec_json:
        return None
    try:
        return FleetSpec.model_validate_json(record.spec_json)
    except ValidationError:
        raise StateError(
            f"the spec recorded for fleet {record.name!r} no longer validates; "
            f"run `fleet repair {record.name} --spec SPEC`"
        ) from None


def providers_of(app: App, record: FleetRecord) -> dict[str, Provider]:
    """The providers a recorded fleet runs on: those its spec allows, or every provider of the
    local cloud for a fleet repaired without one. An existing local cloud is opened as it is
    (its time scale and seed were fixed when it was created). A fleet on the local cloud is told
    from its recorded spec's JSON (``fleet.recorded_spec``): no spec model is built for it."""
    where = where_recorded(record.spec_json) if record.spec_json else None
    if where is not None and where.backend == "local":
        return {n: p for n, p in local_providers(app).items() if where.allows(n)}
    from fleet.spec import Backend
    from providers.registry import providers_for

    spec = spec_of(record)
    if spec is not None and spec.backend is not Backend.LOCAL:
        return providers_for(spec, app.home)
    if spec is not None or record.backend in ("", Backend.LOCAL.value):
        every = local_providers(app)
        return {n: p for n, p in every.items() if spec is None or spec.provider_settings(n) is not None}
    raise FleetError(
        f"fleet {record.name!r} was rebuilt without its spec, so its cloud providers are unknown; "
        f"run `fleet repair {record.name} --spec SPEC`"
    )


def local_providers(app: App) -> dict[str, Provider]:
    """Every provider the local cloud at ``$SPOTFLEET_LOCAL_CLOUD`` or ``<home>/localcloud`` simulates."""
    from fleet.home import local_cloud_root
    from providers.local import LocalCloud

    cloud = LocalCloud.open(local_cloud_root(app.home), time_scale=None, seed=None)
    return {name: cloud.provider(name) for name in cloud.provider_names()}


@contextlib.contextmanager
def try_lock(store: StateStore, fleet: str, command: str, unwritable: list[str] | None = None) -> Iterator[bool]:
    """Yields True holding the fleet's lock, or False when another command holds it or the store
    cannot be written (read-only then; why it cannot be written is appended to ``unwritable``)."""
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(store.lock(fleet, command))
            held = True
        except FleetLockedError:
            held = False
        except UnwritableStoreError as err:
            held = False
            if unwritable is not None:
                unwritable.append(str(err))
        yield held


def confirm(question: str, *, yes: bool, as_json: bool) -> None:
    """Ask ``question`` unless ``yes``; refuse to guess when nobody can answer."""
    if yes:
        return
    if as_json or not sys.stdin.isatty():
        raise FleetError(
            f"{question.rstrip('?')}: not confirmed (no terminal to ask on); nothing was changed; "
            "pass --yes to proceed without a prompt"
        )
    sys.stdout.flush()  # what the question is about is on screen (or in the pipe) first
    try:
        answer = click.confirm(question, default=False, err=True)
    except click.Abort:  # Ctrl-C or end of input at the prompt
        answer = False
    if not answer:
        raise FleetError(f"{question.rstrip('?')}: not confirmed; nothing was changed")


# ---- formatting ----------------------------------------------------------------------------


def money(value: float | None, per_hour: bool = False) -> str:
    if value is None:
        return "-"
    return f"${value:,.2f}{'/h' if per_hour else ''}"


def duration(seconds: float) -> str:
    """``42s``, ``7m05s``, ``3h12m``, ``2d04h``."""
    s = int(max(0.0, seconds))
    for unit, size, sub, subsize in (("d", 86400, "h", 3600), ("h", 3600, "m", 60), ("m", 60, "s", 1)):
        if s >= size:
            return f"{s // size}{unit}{(s % size) // subsize:02d}{sub}"
    return f"{s}s"


def short_pool(pool_id: str) -> str:
    """``aws/us-east-1/use1-az4/p5.48xlarge/spot`` without the market (shown in its own column)."""
    return pool_id.rsplit("/", 1)[0].replace("/-/", "/")


@dataclass
class FleetView:
    """One reconciled look at a recorded fleet (``synced`` is False when another command held
    the fleet's lock: the providers were read, the record was left alone)."""

    record: FleetRecord
    providers: dict[str, Provider]
    obs: Observation
    synced: bool
    result: SyncResult | None
    #: The plan that runs (what a look needs of it), None before any plan was made.
    plan: PlanDigest | None
    #: Why the record could not be written (read-only or full disk), "" when it could.
    unwritable: str = ""
    #: The local clock, read once when the view was taken: every figure of one output uses it.
    read_at: float = field(default_factory=time.time)

    def clock(self, provider: str) -> float:
        """``provider``'s clock as it was read (the local clock when no provider answered)."""
        return self.obs.clock(provider) if self.obs.now else self.read_at


def look(app: App, store: StateStore, name: str, command: str) -> FleetView:
    """Read ``name`` from the providers and reconcile the store with it where the lock allows."""
    record = store.get_fleet(name)
    providers = providers_of(app, record)
    # an `up` stopped before it finished leaves its plan unmarked: that plan is still what runs
    plan = store.latest_plan_digest(name, applied_only=True) or store.latest_plan_digest(name)
    unwritable: list[str] = []
    with try_lock(store, name, command, unwritable) as held:
        obs = observe(providers, name)
        try:
            result = sync(store, obs, prices=dict(plan.on_demand) if plan else {}) if held else None
        except UnwritableStoreError as err:  # the disk filled up after the lock was taken
            held, result = False, None
            unwritable.append(str(err))
    return FleetView(
        record=store.get_fleet(name),
        providers=providers,
        obs=obs,
        synced=held,
        result=result,
        plan=plan,
        unwritable=unwritable[0] if unwritable else "",
    )
