"""``providers.gcp.adc.may_exist``: the credential sources google.auth.default() tries are each
recognised, and a machine with none of them is told so without importing google.auth."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from providers.gcp import adc

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def bare(tmp_path: Path) -> dict[str, str]:
    """An environment with a home and no Google credential source; the DMI product is not Google."""
    (tmp_path / "dmi").write_text("Standard PC (Q35 + ICH9, 2009)\n")
    return {"HOME": str(tmp_path / "home")}


def test_a_machine_without_any_source_has_none(bare: dict[str, str], tmp_path: Path):
    assert adc.may_exist(bare, dmi_product=tmp_path / "dmi") is False
    assert adc.may_exist(bare, dmi_product=tmp_path / "absent") is False


@pytest.mark.parametrize("name", ["GOOGLE_APPLICATION_CREDENTIALS", "K_SERVICE", "GAE_ENV", "GCE_METADATA_HOST"])
def test_each_variable_source_counts(bare: dict[str, str], tmp_path: Path, name: str):
    assert adc.may_exist({**bare, name: "x"}, dmi_product=tmp_path / "dmi") is True


def test_gclouds_application_default_file_counts_in_home_and_in_cloudsdk_config(bare, tmp_path: Path):
    home_file = Path(bare["HOME"]) / ".config" / "gcloud" / "application_default_credentials.json"
    home_file.parent.mkdir(parents=True)
    home_file.write_text("{}")
    assert adc.may_exist(bare, dmi_product=tmp_path / "dmi") is True
    config = tmp_path / "cfg"
    config.mkdir()
    env = {**bare, "CLOUDSDK_CONFIG": str(config)}
    assert adc.may_exist(env, dmi_product=tmp_path / "dmi") is False  # CLOUDSDK_CONFIG replaces ~/.config/gcloud
    (config / "application_default_credentials.json").write_text("{}")
    assert adc.may_exist(env, dmi_product=tmp_path / "dmi") is True


def test_a_google_vm_counts_by_its_dmi_product_name(bare: dict[str, str], tmp_path: Path):
    (tmp_path / "gce").write_text("Google Compute Engine\n")
    assert adc.may_exist(bare, dmi_product=tmp_path / "gce") is True


def test_without_credentials_the_project_error_comes_without_importing_google_auth(tmp_path: Path):
    """What `fleet plan` pays for a GCP entry on a machine with no Google credentials."""
    code = (
        "import sys\n"
        "from providers.gcp.provider import resolve_project\n"
        "from providers.gcp.settings import GcpSettings\n"
        "from fleet.errors import FleetError\n"
        "try:\n    resolve_project(GcpSettings())\nexcept FleetError as err:\n    print('error:', err)\n"
        "print('google.auth' in sys.modules)\n"
    )
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("error: no GCP project")
    if not adc.may_exist(env):  # a CI machine that is itself a Google VM asks google.auth, rightly
        assert lines[1] == "False"
