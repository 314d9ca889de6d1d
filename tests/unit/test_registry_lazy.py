"""The provider registry imports a provider's package when its record is first asked for
(``providers.registry``): a spec naming aws imports aws's settings and no other provider's, and
the records come out in the registry's order whichever was read first. Each case runs in a fresh
interpreter, where nothing has imported a provider yet."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def fresh(code: str) -> object:
    """What ``code`` prints as JSON, run in a fresh interpreter from the repository root."""
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


PROVIDER_MODULES = (
    "import json, sys\n"
    "def providers():\n"
    "    return sorted(m for m in sys.modules if m.startswith('providers.') and m.endswith('.settings'))\n"
)


def test_a_spec_imports_the_settings_of_the_providers_it_names():
    got = fresh(
        PROVIDER_MODULES + "from fleet.spec import parse_spec\n"
        "spec = parse_spec('name: one\\ncapacity: {gpus: 8, accelerators: [H100]}\\nproviders: [aws]\\n')\n"
        "print(json.dumps([providers(), type(spec.provider_settings('aws')).__name__]))\n"
    )
    assert got == [["providers.aws.settings"], "AwsSettings"]


def test_an_unknown_provider_is_named_with_every_known_one_without_importing_them():
    got = fresh(
        PROVIDER_MODULES + "from fleet.spec import parse_spec\n"
        "from fleet.errors import SpecError\n"
        "try:\n"
        "    parse_spec('name: one\\ncapacity: {gpus: 8, accelerators: [H100]}\\nproviders: [awz]\\n')\n"
        "except SpecError as err:\n"
        "    print(json.dumps([providers(), str(err)]))\n"
    )
    modules, message = got
    assert modules == []
    assert "unknown provider 'awz'" in message and "did you mean 'aws'" in message and "runpod" in message


def test_records_keep_the_registry_order_whichever_is_read_first():
    got = fresh(
        "import json\n"
        "from providers import registry\n"
        "first = registry.record('runpod').name\n"
        "print(json.dumps([first, list(registry.records()), list(registry.PACKAGES), list(registry.names())]))\n"
    )
    first, order, packages, names = got
    assert first == "runpod"
    assert order == packages == names


def test_a_setting_of_another_provider_still_names_that_provider():
    got = fresh(
        "import json\n"
        "from fleet.spec import parse_spec\n"
        "from fleet.errors import SpecError\n"
        "try:\n"
        "    parse_spec('name: one\\ncapacity: {gpus: 8, accelerators: [H100]}\\n"
        "providers: {aws: {project: p}}\\n')\n"
        "except SpecError as err:\n"
        "    print(json.dumps(str(err)))\n"
    )
    assert "'project' is a setting of gcp, not of aws" in got
