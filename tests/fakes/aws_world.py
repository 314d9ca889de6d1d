"""A moto server with the EC2 fault proxy in front of it, started once per test process.

``shared()`` starts both on free loopback ports the first time it is called and returns the
same :class:`AwsWorld` afterwards (session scope without a root conftest). ``env`` points
boto3 at the proxy (``AWS_ENDPOINT_URL``) with fake credentials; ``direct(service)`` is a boto3
client straight to moto, for the test's own view of the world (someone else's instances, what is
still running). ``reset()`` empties moto and the proxy's rules between tests.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ec2_proxy import Ec2Proxy  # noqa: E402

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
#: A public AMI moto knows in every region (its bundled image list).
MOTO_AMI = "ami-12c6146b"

_lock = threading.Lock()
_world: AwsWorld | None = None


class AwsUnavailable(RuntimeError):
    """moto or boto3 is not installed here."""


@dataclass
class AwsWorld:
    moto_url: str
    proxy: Ec2Proxy
    _stop: Any
    env: dict[str, str] = field(default_factory=dict)

    def direct(self, service: str, region: str = "us-east-1") -> Any:
        import boto3

        return boto3.client(
            service,
            endpoint_url=self.moto_url,
            region_name=region,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )

    def reset(self) -> None:
        req = urllib.request.Request(f"{self.moto_url}/moto-api/reset", data=b"", method="POST")
        urllib.request.urlopen(req, timeout=10).close()
        self.proxy.reset()
        self.proxy.state.latency = 0.0

    def subnets(self, region: str, zone_id: str) -> tuple[str, ...]:
        """The default subnets of a zone ID (what the adapter launches into)."""
        got = self.direct("ec2", region).describe_subnets(
            Filters=[
                {"Name": "availability-zone-id", "Values": [zone_id]},
                {"Name": "default-for-az", "Values": ["true"]},
            ]
        )
        return tuple(s["SubnetId"] for s in got["Subnets"])

    @contextmanager
    def environment(self) -> Iterator[None]:
        """``os.environ`` pointed at this world for the block (for in-process adapters)."""
        old = {k: os.environ.get(k) for k in self.env}
        os.environ.update(self.env)
        try:
            yield
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def shared() -> AwsWorld:
    """The process-wide world (started on first use); raises AwsUnavailable without moto."""
    global _world
    with _lock:
        if _world is None:
            try:
                from moto.server import ThreadedMotoServer
            except ImportError as err:
                raise AwsUnavailable(f"moto not installed ({err.name}): pip install -e '.[test]'") from err
            logging.getLogger("werkzeug").setLevel(logging.ERROR)
            server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
            server.start()
            host, port = server.get_host_and_port()
            url = f"http://{host}:{port}"
            proxy = Ec2Proxy(url).start()

            def stop() -> None:
                proxy.stop()
                server.stop()

            atexit.register(stop)
            _world = AwsWorld(url, proxy, stop, env={**CREDENTIALS, "AWS_ENDPOINT_URL": proxy.url})
        return _world


def fresh() -> AwsWorld:
    """The shared world, emptied, for one test; skips the test without moto (fails under CI)."""
    import pytest

    try:
        world = shared()
    except AwsUnavailable as err:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(err))
    world.reset()
    return world
