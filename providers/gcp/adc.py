"""Whether Google's Application Default Credentials could be found, decided without importing
``google.auth`` (a third of a second, and a metadata-server probe, on every `fleet plan`).

:func:`may_exist` answers from the same sources ``google.auth.default()`` tries, in its order
(https://google.aip.dev/auth/4110): the ``GOOGLE_APPLICATION_CREDENTIALS`` file, gcloud's
application-default file (``$CLOUDSDK_CONFIG`` or ``~/.config/gcloud``, ``%APPDATA%\\gcloud`` on
Windows), and the metadata server of Google's runtimes (Compute Engine and GKE, whose DMI product
name says Google; App Engine, Cloud Run and Cloud Functions, which set their own variables; or an
explicit ``GCE_METADATA_HOST``). A False answer means ``google.auth.default()`` would fail, so the
caller may skip it; True means only that it is worth asking.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

#: Variables Google's serverless runtimes set (their credentials come from the metadata server).
RUNTIME_ENVS = ("GAE_ENV", "GAE_APPLICATION", "K_SERVICE", "FUNCTION_TARGET", "CLOUD_RUN_JOB")
#: An explicit metadata server (google.auth honours both).
METADATA_ENVS = ("GCE_METADATA_HOST", "GCE_METADATA_IP")
DMI_PRODUCT = Path("/sys/class/dmi/id/product_name")


def may_exist(environ: Mapping[str, str] | None = None, dmi_product: Path = DMI_PRODUCT) -> bool:
    """False when no source of Application Default Credentials is present (see the module doc)."""
    env = os.environ if environ is None else environ
    if env.get("GOOGLE_APPLICATION_CREDENTIALS"):
        return True
    if (_gcloud_config(env) / "application_default_credentials.json").is_file():
        return True
    if any(env.get(name) for name in RUNTIME_ENVS + METADATA_ENVS):
        return True
    try:
        return dmi_product.read_text(errors="replace").strip().startswith("Google")
    except OSError:
        return False


def _gcloud_config(env: Mapping[str, str]) -> Path:
    if env.get("CLOUDSDK_CONFIG"):
        return Path(env["CLOUDSDK_CONFIG"])
    if os.name == "nt" and env.get("APPDATA"):
        return Path(env["APPDATA"]) / "gcloud"
    return Path(env.get("HOME") or Path.home()) / ".config" / "gcloud"
