"""Azurite's Blob service over HTTPS with OAuth bearer tokens (``--oauth basic``), for the token path.

Azurite accepts a bearer token only over HTTPS and, at the ``basic`` level, checks its issuer
(``https://sts.windows.net/...``), audience (``https://storage.azure.com`` or the account's own
endpoint) and lifetime, not its signature: tokens from the fake IMDS (``metadata.FakeAzure``)
pass, exactly as a managed identity's tokens reach a real account. :func:`self_signed` makes the
certificate (for 127.0.0.1 and localhost, with ``cryptography``); clients trust it through
``REQUESTS_CA_BUNDLE`` or the SDK's ``connection_verify``. Shared-key access (the well-known
development key) keeps working, for setting up containers.

Run alone: ``python tests/fakes/azurite_oauth.py`` prints the endpoint and the CA file.
"""

from __future__ import annotations

import datetime
import ipaddress
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from storage_emulators import AZURITE_ACCOUNT, AZURITE_KEY, _terminate, azurite_binary, free_port  # noqa: E402


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate and key (PEM) for 127.0.0.1 and localhost, valid for a day."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "azurite.pem", directory / "azurite.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


@dataclass
class AzuriteOAuth:
    """A running HTTPS Azurite: ``endpoint`` (no account), ``ca`` (PEM to trust), ``connection_string``."""

    endpoint: str
    ca: Path
    connection_string: str
    proc: subprocess.Popen[bytes]
    workdir: str

    def stop(self) -> None:
        _terminate(self.proc)
        shutil.rmtree(self.workdir, ignore_errors=True)


def start_azurite_oauth(timeout: float = 30.0) -> AzuriteOAuth:
    """Azurite Blob on a free port, HTTPS with a fresh certificate, OAuth ``basic``, in memory."""
    binary = azurite_binary()
    workdir = tempfile.mkdtemp(prefix="azurite-oauth-")
    cert, key = self_signed(Path(workdir))
    port = free_port()
    proc = subprocess.Popen(
        [
            binary,
            "--blobHost",
            "127.0.0.1",
            "--blobPort",
            str(port),
            "--inMemoryPersistence",
            "--skipApiVersionCheck",
            "--loose",
            "--silent",
            "--disableTelemetry",
            "--cert",
            str(cert),
            "--key",
            str(key),
            "--oauth",
            "basic",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=workdir,
    )
    endpoint = f"https://127.0.0.1:{port}"
    context = ssl.create_default_context(cafile=str(cert))
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            shutil.rmtree(workdir, ignore_errors=True)
            raise RuntimeError(f"azurite exited with code {proc.returncode}")
        try:
            urllib.request.urlopen(f"{endpoint}/{AZURITE_ACCOUNT}?comp=list", timeout=1, context=context).close()
            break
        except urllib.error.HTTPError:
            break  # it answered (anonymous listing is refused)
        except OSError as err:
            if time.monotonic() > deadline:
                _terminate(proc)
                shutil.rmtree(workdir, ignore_errors=True)
                raise RuntimeError(f"azurite did not answer {endpoint} within {timeout:.0f} s") from err
            time.sleep(0.05)
    conn = (
        f"DefaultEndpointsProtocol=https;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
        f"BlobEndpoint={endpoint}/{AZURITE_ACCOUNT};"
    )
    return AzuriteOAuth(endpoint, cert, conn, proc, workdir)


if __name__ == "__main__":
    server = start_azurite_oauth()
    print(f"Azurite (HTTPS, OAuth basic) on {server.endpoint}/{AZURITE_ACCOUNT}; CA {server.ca}", flush=True)
    try:
        server.proc.wait()
    except KeyboardInterrupt:
        server.stop()
