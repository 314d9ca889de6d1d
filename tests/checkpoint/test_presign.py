"""``presign(key, seconds)``: every store hands out a URL that GETs one object with no credentials
(what a node downloads spotfleet's wheel with, ``fleet.provisioning.ship``)."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from fleet.checkpoint.payload import Payload


@pytest.mark.emulator
def test_a_presigned_url_reads_that_object_and_nothing_else(location):
    store = location.store()
    data = b"PK\x03\x04 a wheel " * 1000
    store.upload("_spotfleet/wheels/x.whl", Payload.of([data]))
    store.upload("data/secret.bin", Payload.of([b"not for the URL"]))
    url = store.presign("_spotfleet/wheels/x.whl", 3600)
    with urllib.request.urlopen(url, timeout=30) as answer:  # a plain GET: no keys, no SDK
        assert answer.read() == data
    if location.kind == "az":  # signed for its one object (Azurite checks SAS; moto checks no signature)
        other = url.replace("_spotfleet/wheels/x.whl", "data/secret.bin").replace(
            "_spotfleet%2Fwheels%2Fx.whl", "data%2Fsecret.bin"
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(other, timeout=30)
        assert refused.value.code in (401, 403)
