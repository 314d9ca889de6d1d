"""Where this machine keeps a fleet's record and its local cloud, and how a use case opens them.

A ``Workspace`` is anything with ``home`` (the spotfleet home: price caches, the local cloud)
and ``state_url`` (the state store: a file path, ``sqlite:///path`` or ``postgresql://...``);
the CLI's ``App`` is one, the dashboard holds one. The functions here open the store (missing ->
``StateError`` unless asked to create it; a store that cannot be written is opened read-only
where a command must still work), read the spec recorded with a fleet, and give the providers a
recorded fleet runs on.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from fleet.errors import FleetError, FleetLockedError, StateError
from fleet.private import private_dir
from fleet.recorded_spec import where_recorded
from fleet.state import FleetRecord, StateStore, UnwritableStoreError, open_store
from fleet.state.db import path_from_url
from providers.base import Provider

if TYPE_CHECKING:
    from fleet.spec import FleetSpec


class Workspace(Protocol):
    """Where the state store and the spotfleet home are (``fleet.cli.app.App`` is one)."""

    @property
    def home(self) -> Path: ...

    @property
    def state_url(self) -> str: ...


@dataclass(frozen=True)
class Place:
    """A ``Workspace`` given outright (the dashboard, benchmarks, tests)."""

    home: Path
    state_url: str


def store_exists(where: Workspace) -> bool:
    """Whether a store may already exist at ``where.state_url`` without creating one (a database
    server is asked when opened; a file is looked for)."""
    from fleet.state.db import is_postgres_url

    return is_postgres_url(where.state_url) or path_from_url(where.state_url).exists()


def store_of(where: Workspace, *, create: bool = False) -> StateStore:
    """The state store at ``where.state_url``; missing -> StateError unless ``create``. The spotfleet
    home holding it (``$SPOTFLEET_HOME``, ``~/.spotfleet``) is made private (0700) on the way."""
    from fleet.state.db import is_postgres_url

    if (
        not is_postgres_url(where.state_url)
        and where.home.is_dir()
        and path_from_url(where.state_url).parent.resolve() == where.home.resolve()
    ):
        private_dir(where.home)
    return open_store(where.state_url, create=create)


def readable_store(where: Workspace) -> tuple[StateStore, str]:
    """The store for a command that must work when it cannot be written (``down``, ``status``):
    ``(store, "")``, or the store opened read-only and why it cannot be written."""
    try:
        return store_of(where), ""
    except UnwritableStoreError as err:
        return open_store(where.state_url, create=False, read_only=True), str(err)


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


def providers_of(where: Workspace, record: FleetRecord) -> dict[str, Provider]:
    """The providers a recorded fleet runs on: those its spec allows, or every provider of the
    local cloud for a fleet repaired without one. An existing local cloud is opened as it is
    (its time scale and seed were fixed when it was created). A fleet on the local cloud is told
    from its recorded spec's JSON (``fleet.recorded_spec``): no spec model is built for it."""
    recorded = where_recorded(record.spec_json) if record.spec_json else None
    if recorded is not None and recorded.backend == "local":
        return {n: p for n, p in local_providers(where).items() if recorded.allows(n)}
    from fleet.spec import Backend
    from providers.registry import providers_for

    spec = spec_of(record)
    if spec is not None and spec.backend is not Backend.LOCAL:
        return providers_for(spec, where.home)
    if spec is not None or record.backend in ("", Backend.LOCAL.value):
        every = local_providers(where)
        return {n: p for n, p in every.items() if spec is None or spec.provider_settings(n) is not None}
    raise FleetError(
        f"fleet {record.name!r} was rebuilt without its spec, so its cloud providers are unknown; "
        f"run `fleet repair {record.name} --spec SPEC`"
    )


def local_providers(where: Workspace) -> dict[str, Provider]:
    """Every provider the local cloud at ``$SPOTFLEET_LOCAL_CLOUD`` or ``<home>/localcloud`` simulates."""
    from fleet.home import local_cloud_root
    from providers.local import LocalCloud

    cloud = LocalCloud.open(local_cloud_root(where.home), time_scale=None, seed=None)
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
