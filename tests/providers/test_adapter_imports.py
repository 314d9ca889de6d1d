"""Registering a cloud adapter imports no SDK: `fleet plan`, `fleet check` and `fleet up` load every
adapter the spec names (``providers.registry.load_adapter``) before any of them talks to its
cloud, and the SDKs take seconds to import. A missing SDK still fails at registration, naming
the extra to install. Each case runs in a fresh interpreter, so what it imported is its own."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SDKS = ("boto3", "botocore", "azure.core", "azure.identity", "azure.mgmt.compute", "httpx", "oci")


def _run(code: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_loading_the_adapters_and_building_aws_imports_no_sdk():
    got = _run(f"""
import json, sys
from providers.aws.settings import AwsSettings
from providers.registry import load_adapter
loaded = {{name: load_adapter(name) for name in ("aws", "azure", "vast", "oci")}}
from providers.aws.provider import AwsProvider
AwsProvider(AwsSettings(regions=["us-east-1"]))      # built, not yet asked anything
from providers.oci.provider import from_spec
from providers.oci.settings import OciSettings
from fleet.spec import parse_spec
from_spec(parse_spec("name: xo\\ncapacity: {{gpus: 1, accelerators: [A10]}}\\n"), OciSettings())
print(json.dumps({{"loaded": loaded, "sdks": [m for m in {SDKS!r} if m in sys.modules]}}))
""")
    assert got == {"loaded": {"aws": True, "azure": True, "vast": True, "oci": True}, "sdks": []}


@pytest.mark.parametrize(
    "name, module, extra",
    [("aws", "boto3", "aws"), ("azure", "azure.core", "azure-vm"), ("vast", "httpx", "vast"), ("oci", "oci", "oci")],
)
def test_a_missing_sdk_is_named_when_the_adapter_loads(name, module, extra):
    got = _run(f"""
import json, sys
sys.modules[{module!r}] = None          # the SDK is not importable
from fleet.errors import FleetError
from providers.registry import load_adapter
try:
    load_adapter({name!r})
    print(json.dumps("loaded"))
except FleetError as err:
    print(json.dumps(str(err)))
""")
    assert f"the {name} adapter needs a package that is not installed ({module})" in got
    assert f"[{extra}]" in got
