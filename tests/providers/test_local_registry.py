"""providers_for: the local backend builds simulated providers; the cloud backend names the fix."""

from __future__ import annotations

from dataclasses import replace

import pytest

from fleet.errors import FleetError
from fleet.spec import parse_spec
from providers import registry
from providers.local import LocalCloud, LocalProvider

SPEC = """
name: quick
backend: {backend}
capacity:
  gpus: 8
  accelerators: [H100]
local:
  time_scale: 600
  seed: 4
"""


def test_local_backend_builds_every_provider_the_spec_allows(tmp_path, monkeypatch):
    monkeypatch.delenv(registry.LOCAL_CLOUD_ENV, raising=False)
    spec = parse_spec(SPEC.format(backend="local") + "providers:\n  aws: {}\n  gcp: {}\n  vast: {enabled: false}\n")
    got = registry.providers_for(spec, tmp_path)
    assert sorted(got) == ["aws", "gcp"]
    assert all(isinstance(p, LocalProvider) and p.name == name for name, p in got.items())
    cloud = LocalCloud.open(tmp_path / "localcloud")
    assert (cloud.time_scale, cloud.seed) == (600, 4)


def test_local_backend_without_provider_list_simulates_all(tmp_path, monkeypatch):
    monkeypatch.delenv(registry.LOCAL_CLOUD_ENV, raising=False)
    got = registry.providers_for(parse_spec(SPEC.format(backend="local")), tmp_path)
    assert sorted(got) == sorted(["aws", "gcp", "azure", "vast", "lambda", "runpod", "oci"])


def test_env_points_at_another_cloud(tmp_path, monkeypatch):
    monkeypatch.setenv(registry.LOCAL_CLOUD_ENV, str(tmp_path / "elsewhere"))
    provider = registry.providers_for(parse_spec(SPEC.format(backend="local")), tmp_path / "home")["aws"]
    assert provider.cloud.root == (tmp_path / "elsewhere").absolute()
    assert not (tmp_path / "home" / "localcloud").exists()


def test_cloud_backend_says_what_to_do(tmp_path, monkeypatch):
    """Every provider has an adapter now: one that cannot be built names its own fix, and a provider
    without an adapter (a record with no factory) points at the local cloud."""
    with pytest.raises(FleetError, match="providers.gcp.project"):
        registry.providers_for(parse_spec(SPEC.format(backend="cloud") + "providers: [gcp]\n"), tmp_path)
    monkeypatch.setattr(
        registry,
        "_records",
        {name: replace(rec, factory=None) if name == "oci" else rec for name, rec in registry.records().items()},
    )
    with pytest.raises(FleetError, match="backend: local") as err:
        registry.providers_for(parse_spec(SPEC.format(backend="cloud") + "providers: [oci]\n"), tmp_path)
    assert "no cloud adapter for" in str(err.value)


def test_registered_cloud_adapters_plug_in_by_name(tmp_path, monkeypatch):
    cloud = LocalCloud.open(tmp_path / "stand-in", time_scale=0)
    stand_ins = {
        name: replace(
            rec, factory=lambda spec, settings, n=name: cloud.provider(n), sdk_modules=(), preflight=None
        )  # the stand-in needs no project
        if name in ("aws", "gcp")
        else replace(rec, factory=None)
        for name, rec in registry.records().items()
    }
    monkeypatch.setattr(registry, "_records", stand_ins)
    spec = parse_spec(SPEC.format(backend="cloud") + "providers: [aws, gcp]\n")
    assert sorted(registry.providers_for(spec, tmp_path)) == ["aws", "gcp"]
    spec = parse_spec(SPEC.format(backend="cloud") + "providers: [aws, azure]\n")
    with pytest.raises(FleetError, match="azure"):
        registry.providers_for(spec, tmp_path)
