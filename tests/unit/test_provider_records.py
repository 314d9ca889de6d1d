"""Every registered provider has every piece ``docs/adding-a-provider.md`` lists: forgetting a step
fails here, not at a user's launch. The pieces are found on disk by the page's conventions;
:data:`FILES` names each provider's fake, and its CLI lifecycle is a world in ``WORLDS``
(tests/cli/lifecycle_worlds.py), which tests/cli/test_provider_lifecycle.py runs."""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

import pytest
import tomllib

from fleet.spec import ProviderSettings
from providers.kit.record import ProviderRecord
from providers.local.vendors import VENDORS
from providers.registry import PACKAGES, records

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from cli.lifecycle_worlds import WORLDS  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
#: Provider -> its fake under tests/fakes/.
FILES = {
    "aws": "aws_world.py",
    "gcp": "gce_server.py",
    "azure": "azure_arm.py",
    "vast": "vast_server.py",
    "oci": "oci_server.py",
    "lambda": "lambda_server.py",
    "runpod": "runpod_server.py",
}

#: Files every adapter package has, each with the same role in every provider (docs/adding-a-provider.md).
ROLES = ("__init__.py", "settings.py", "provider.py", "errors.py", "check.py")
ADAPTERS = [name for name, rec in records().items() if rec.has_adapter]


def test_the_packages_and_the_records_agree():
    assert set(PACKAGES) <= set(records()), "every package declares its RECORD under its own name"
    assert all(records()[name].has_adapter for name in PACKAGES), "a package ships an adapter"


@pytest.mark.parametrize("name", sorted(records()))
def test_every_provider_can_be_simulated_and_named_in_a_spec(name):
    rec = records()[name]
    assert name in VENDORS, f"{name}: add a simulated vendor to providers/local/vendors.py"
    assert issubclass(rec.settings, ProviderSettings)


@pytest.mark.parametrize("name", ADAPTERS)
def test_every_adapter_has_every_piece(name):
    rec: ProviderRecord = records()[name]
    package = ROOT / PACKAGES[name].replace(".", "/")
    missing = [role for role in ROLES if not (package / role).is_file()]
    assert not missing, f"{name}: {package.relative_to(ROOT)} lacks {missing}"
    assert rec.settings is not ProviderSettings, f"{name}: give it its own settings model (settings.py)"
    assert rec.check is not None, f"{name}: the record names no `fleet check` function"
    assert rec.checkpoint_scheme, f"{name}: the record says where checkpoints go (checkpoint_scheme)"
    assert rec.title and rec.summary, f"{name}: the record has a title and a one-line summary"
    assert name in FILES, f"{name}: add its fake to FILES in {Path(__file__).name}"
    assert (ROOT / "tests/fakes" / FILES[name]).is_file(), f"{name}: no fake tests/fakes/{FILES[name]}"
    assert name in WORLDS, f"{name}: add a world to WORLDS in tests/cli/lifecycle_worlds.py (the CLI lifecycle suite)"
    contract = (ROOT / "tests/contract/conftest.py").read_text()
    assert re.search(rf'"{re.escape(name)}(:[\w-]+)?"', contract.split("TARGETS", 1)[1].split("]", 1)[0]), (
        f"{name}: add it to TARGETS in tests/contract/conftest.py"
    )
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert rec.extra in extras, f"{name}: pyproject.toml has no extra {rec.extra!r}"
    assert any(rec.extra in dep for dep in extras["test"]), f"{name}: the `test` extra does not bring {rec.extra!r}"
    page = ROOT / "docs/providers" / f"{name}.md"
    assert page.is_file(), f"{name}: no docs page docs/providers/{name}.md (what it needs, what a node gets)"
    assert page.read_text().startswith(f"# Running on {rec.display}\n"), (
        f"{name}: title the page '# Running on {rec.display}'"
    )
    listed = (ROOT / "mkdocs.yml").read_text() + (ROOT / "docs/providers/index.md").read_text()
    assert f"providers/{name}.md" in listed and f"]({name}.md)" in listed, (
        f"{name}: list docs/providers/{name}.md in mkdocs.yml's nav and in docs/providers/index.md"
    )


@pytest.mark.parametrize("name", ADAPTERS)
def test_the_node_side_knows_the_provider(name):
    """A node agent watches the cloud its record names, and the bootstrap starts it with that name."""
    from fleet.agent.detect import CLOUDS
    from fleet.bootstrap import AGENT_CLOUD

    rec = records()[name]
    assert rec.checkpoint_scheme in ("s3", "gs", "az", "file"), f"{name}: unknown checkpoint_scheme"
    if rec.agent_cloud:
        assert rec.agent_cloud in CLOUDS, f"{name}: fleet/agent/detect.py CLOUDS lacks {rec.agent_cloud!r}"
        assert AGENT_CLOUD.get(name) == rec.agent_cloud, f"{name}: fleet/bootstrap.py AGENT_CLOUD lacks it"


@pytest.mark.parametrize("name", ADAPTERS)
def test_the_pulumi_story_is_told(name):
    rec = records()[name]
    assert rec.pulumi_stack or rec.pulumi_refusal, (
        f"{name}: name its Pulumi stack or why `fleet export pulumi` refuses it"
    )
    if rec.pulumi_stack:
        module, _, cls = rec.pulumi_stack.partition(":")
        assert (ROOT / (module.replace(".", "/") + ".py")).is_file() and cls, f"{name}: no stack {rec.pulumi_stack}"


@pytest.mark.parametrize("name", ADAPTERS)
def test_a_record_imports_no_adapter_code(name):
    """Reading a record (every spec does) must not import the adapter itself."""
    importlib.import_module(PACKAGES[name])
    source = (ROOT / PACKAGES[name].replace(".", "/") / "__init__.py").read_text()
    top_level = [line for line in source.splitlines() if line.startswith(("import ", "from "))]
    allowed = ("from __future__", "from typing", "from providers.kit.record", f"from {PACKAGES[name]}.settings")
    assert all(line.startswith(allowed) for line in top_level), f"{name}: __init__ imports {top_level}"


def test_the_template_package_is_a_complete_start():
    """``providers/_template`` (docs/adding-a-provider.md) imports, has every role, and its adapter
    speaks the protocol on the kit."""
    from providers._template import RECORD
    from providers.base import Provider

    package = ROOT / "providers/_template"
    assert not [role for role in ROLES if not (package / role).is_file()]
    assert RECORD.name not in records() and RECORD.settings is not ProviderSettings
    provider = RECORD.factory(None, RECORD.settings())  # type: ignore[arg-type,misc]
    assert isinstance(provider, Provider) and provider.name == RECORD.name


def test_the_adding_a_provider_page_names_every_piece_this_test_checks():
    page = (ROOT / "docs/adding-a-provider.md").read_text()
    for piece in (
        *ROLES,
        "PACKAGES",
        "RECORD",
        "tests/fakes/",
        "tests/contract/conftest.py",
        "TARGETS",
        "tests/cli/",
        "pyproject.toml",
        "# Running on",
        "docs/providers/",
        "mkdocs.yml",
        "providers/local/vendors.py",
        "FILES",
        "WORLDS",
        "tests/cli/lifecycle_worlds.py",
    ):
        assert piece in page, f"docs/adding-a-provider.md does not mention {piece}"
