"""``fleet.recorded_spec`` reads a recorded spec's backend and providers as ``FleetSpec`` does
(``fleet status`` of a local fleet relies on it instead of building the model), and leaves JSON
in any other shape to the full validation."""

from __future__ import annotations

import pytest

from fleet.recorded_spec import where_recorded
from fleet.spec import known_providers, parse_spec

BASE = "name: rec\nbackend: {backend}\ncapacity: {{gpus: 8, accelerators: [H100]}}\n"
PROVIDERS = [
    "",  # none listed: every provider
    "providers: [aws, gcp]\n",
    "providers: {aws: {}, vast: null}\n",
    "providers: {aws: {enabled: false}, gcp: {regions: [us-central1]}}\n",
    "providers: {runpod: {enabled: true}, lambda: {enabled: false}, oci: {}}\n",
]


@pytest.mark.parametrize("backend", ["local", "cloud"])
@pytest.mark.parametrize("providers", PROVIDERS)
def test_it_allows_the_providers_the_spec_allows(backend, providers):
    spec = parse_spec(BASE.format(backend=backend) + providers)
    where = where_recorded(spec.model_dump_json())
    assert where is not None and where.backend == backend
    for name in (*known_providers(), "nosuch"):
        assert where.allows(name) == (spec.provider_settings(name) is not None), name


@pytest.mark.parametrize(
    "text",
    [
        "",
        "not json",
        "[]",
        "null",
        '{"backend": "local"}',
        '{"backend": "moon", "providers": {}}',
        '{"backend": "local", "providers": []}',
        '{"backend": "local", "providers": {"aws": null}}',
        '{"backend": "local", "providers": {"aws": {}}}',
        '{"backend": "local", "providers": {"aws": {"enabled": "yes"}}}',
    ],
)
def test_json_in_another_shape_is_left_to_the_full_validation(text):
    assert where_recorded(text) is None
