"""Shipping the running spotfleet to a fleet's nodes: the wheel in the fleet's bucket, a URL to fetch it.

``ship(store_uri)`` builds (or finds in the cache) the wheel of the running spotfleet
(:mod:`fleet.provisioning.wheel`), stores it at ``<store_uri>/_spotfleet/wheels/<wheel file>``
through the checkpoint store abstraction (one code path for S3, GCS, Azure Blob and the local
cloud's directory buckets) and mints a read-only URL of that one object that the node bootstrap
downloads (``fleet.bootstrap``).

Contract:

* nothing is uploaded when the object already holds a wheel of the same name and size (the name
  carries the content hash), so a rerun of ``fleet up`` uploads nothing;
* every provider gets a presigned URL (S3 presign, GCS V4 signed URL, Azure SAS): one code path,
  whether the node has an identity (AWS instance profile, GCP service account, Azure managed
  identity) or not (Vast). The wheel is spotfleet's own code and holds no secret, so the URL's
  only job is to be short-lived enough: it is valid for :data:`URL_SECONDS` and a minted URL is
  reused (remembered beside the wheel cache) while at least :data:`URL_MIN_LEFT` of it is left,
  so the start-up script is the same for the same inputs within that window and every node gets
  a URL that works for hours after its launch (the rebalancer mints anew for later nodes);
* the node checks the wheel's sha256 before installing it.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from fleet.checkpoint.errors import CheckpointError
from fleet.checkpoint.payload import Payload
from fleet.checkpoint.stores import ObjectStore, open_store
from fleet.errors import FleetError
from fleet.model import NodeConfig
from fleet.provisioning.wheel import Wheel, build, default_cache
from fleet.spec import SHIP, Backend, FleetSpec
from providers.base import Provider, StorageSpec

#: Where shipped wheels lie under a fleet's checkpoint URI (node logs lie in ``_spotfleet/logs``).
WHEELS = "_spotfleet/wheels"
URL_SECONDS = 12 * 3600
URL_MIN_LEFT = 6 * 3600


@dataclass(frozen=True)
class Shipped:
    """A wheel stored for a fleet: the object's URI, a URL to GET it, and its sha256."""

    uri: str
    url: str
    file: str
    sha256: str
    uploaded: bool


def node_software(spec: FleetSpec, providers: Mapping[str, Provider], node: NodeConfig) -> NodeConfig:
    """``node`` with the shipped wheel's file, sha256 and URL when ``node.spotfleet`` is ``ship``.

    The wheel goes to the fleet's checkpoint URI (``node.checkpoint_uri``); with ``backend:
    local``, to the local cloud's bucket of the fleet (its nodes run commands directly and do not
    install it). Raises FleetError, before anything is launched, when a cloud fleet has no bucket
    (``checkpoint.provider: local``) or the store refuses the wheel.
    """
    if node.spotfleet != SHIP:
        return node
    store_uri = node.checkpoint_uri
    if spec.backend is Backend.LOCAL and providers:
        name, provider = sorted(providers.items())[0]
        store_uri = provider.ensure_bucket(StorageSpec(provider=name, bucket=spec.bucket, fleet=spec.name)).uri
    if not store_uri:
        raise FleetError(
            "node.spotfleet is 'ship' (the default): nodes fetch spotfleet's wheel from the fleet's checkpoint "
            "bucket, but checkpoint.provider is 'local' on backend: cloud, so there is none. Set checkpoint.provider "
            "to s3, gcs or azure, or node.spotfleet to a pip requirement (e.g. 'spotfleet[s3]==0.1.0' or "
            "'git+https://host/spotfleet.git@v0.1.0') or to 'preinstalled'"
        )
    try:
        shipped = ship(store_uri)
    except (CheckpointError, OSError) as err:
        raise FleetError(f"cannot ship spotfleet to the fleet's nodes (node.spotfleet: ship): {err}") from err
    return node.model_copy(
        update={"wheel_url": shipped.url, "wheel_file": shipped.file, "wheel_sha256": shipped.sha256}
    )


def ship(
    store_uri: str,
    *,
    env: Mapping[str, str] | None = None,
    cache_dir: Path | None = None,
    clock: Callable[[], float] = time.time,
) -> Shipped:
    """Store the running spotfleet's wheel under ``store_uri`` and mint its URL (see the module doc).

    Raises ``CheckpointError`` when the store cannot be written or cannot sign a URL.
    """
    cache_dir = cache_dir or default_cache()
    wheel = build(cache_dir)
    store = open_store(store_uri, env=env)
    key = f"{WHEELS}/{wheel.name}"
    uploaded = store.size(key) != wheel.size
    if uploaded:
        store.upload(key, Payload.of([wheel.path.read_bytes()]))
    uri = f"{store.uri.rstrip('/')}/{key}"
    return Shipped(
        uri=uri,
        url=_url(store, key, uri, cache_dir, clock),
        file=wheel.name,
        sha256=_sha256(wheel, cache_dir),
        uploaded=uploaded,
    )


def _url(store: ObjectStore, key: str, uri: str, cache_dir: Path, clock: Callable[[], float]) -> str:
    """A URL of ``key`` valid for at least URL_MIN_LEFT more seconds, reused from the cache if one is."""
    path = cache_dir / "urls.json"
    try:
        known = json.loads(path.read_text())
        known = known if isinstance(known, dict) else {}
    except (OSError, ValueError):
        known = {}
    now = clock()
    entry = known.get(uri)
    if (
        isinstance(entry, dict)
        and isinstance(entry.get("url"), str)
        and isinstance(entry.get("expires"), (int, float))
        and entry["expires"] - now >= URL_MIN_LEFT
    ):
        return str(entry["url"])
    url = store.presign(key, URL_SECONDS)
    known = {k: v for k, v in known.items() if isinstance(v, dict) and v.get("expires", 0) > now}
    known[uri] = {"url": url, "expires": now + URL_SECONDS}
    tmp = path.with_name(f".urls.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # URLs grant reads: owner only
    with os.fdopen(fd, "w") as f:
        json.dump(known, f, indent=1, sort_keys=True)
    os.replace(tmp, path)
    return url


def _sha256(wheel: Wheel, cache_dir: Path) -> str:
    """The wheel's sha256, remembered beside it (the wheel is immutable under its name)."""
    side = cache_dir / f"{wheel.name}.sha256"
    try:
        known = side.read_text().strip()
        if len(known) == 64:
            return known
    except OSError:
        pass
    digest = wheel.sha256
    side.write_text(digest + "\n")
    return digest
