"""A `backend: cloud` world for CLI tests against one provider's HTTP fake (tests/fakes/*_server.py).

The fake runs on a thread of the test process; the ``fleet`` command runs as a real subprocess
with a fresh home, reaching the fake through the provider's URL variable and key. Subclasses
(one per provider: ``*_world.py``) add what they read from the fake's control API and the
lifecycle interface (tests/cli/lifecycle_world.py) that ``tests/cli/test_provider_lifecycle.py``
drives.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
from cli.lifecycle_world import FLEET_BIN, LifecycleWorld


class ApiWorld(LifecycleWorld):
    """``spec`` written under ``root``; ``env_vars`` (URL, key) point `fleet` at the fake at ``url``;
    variables starting with ``strip`` are dropped from the caller's environment first."""

    #: Seconds one ``fleet`` command may take.
    timeout: int = 180

    def __init__(
        self, root: Path, url: str, *, spec: str, name: str, env_vars: Mapping[str, str], strip: tuple[str, ...] = ()
    ):
        self.root, self.url = root, url
        self.home = root / "home"
        self.spec = root / f"{name}.yaml"
        self.spec.write_text(spec)
        self._env_vars = dict(env_vars)
        self._strip = ("SPOTFLEET_", *strip)

    def control(self, path: str, body: dict | None = None) -> Any:
        url = f"{self.url}/_control/{path}"
        resp = httpx.post(url, json=body) if body is not None else httpx.get(url)
        resp.raise_for_status()
        return resp.json()

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(self._strip)}
        env.update(
            {
                "SPOTFLEET_HOME": str(self.home),
                "HOME": str(self.root),
                "COLUMNS": "200",
                "NO_COLOR": "1",
                **self._env_vars,
                **extra,
            }
        )
        return env

    def fleet(self, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [FLEET_BIN, *args],
            env=self.env(**extra),
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=self.timeout,
        )

    def fleet_json(self, *args: str, ok: tuple[int, ...] = (0,)) -> Any:
        proc = self.fleet(*args, "--json")
        assert proc.returncode in ok, f"fleet {' '.join(args)} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        return json.loads(proc.stdout)


def assert_key_nowhere(world: ApiWorld, key: str, fleet: str) -> None:
    """``up``, ``status`` (both faces) and ``down`` succeed and none of their output, and no file of
    the home (the state store included), holds the API ``key``."""
    outputs = [
        world.fleet("up", str(world.spec), "--yes", "--json"),
        world.fleet("status", fleet, "--json"),
        world.fleet("status", fleet),
        world.fleet("down", fleet, "--yes", "--json"),
    ]
    assert all(p.returncode == 0 for p in outputs), [p.stderr for p in outputs]
    for proc in outputs:
        assert key not in proc.stdout and key not in proc.stderr
    for path in world.home.rglob("*"):
        if path.is_file():
            assert key.encode() not in path.read_bytes(), path


def assert_check_reports_the_key(world: ApiWorld, provider: str, key_var: str, wrong: str) -> None:
    """``fleet check <provider>`` passes with the key, fails naming ``$key_var`` with a ``wrong`` one
    (never printing it) and says "no API key" with the fix when there is none, without a traceback."""
    ok = world.fleet_json("check", provider)
    assert ok[0]["ok"] and ok[0]["can_price"] and ok[0]["can_launch"]
    bad = world.fleet("check", provider, "--json", **{key_var: wrong})
    assert bad.returncode == 1
    [res] = json.loads(bad.stdout)
    assert not res["ok"] and res["can_launch"] is False and key_var in res["fix"]
    assert wrong not in bad.stdout
    env = world.env()
    del env[key_var]
    keyless = subprocess.run([FLEET_BIN, "check", provider], env=env, capture_output=True, text=True, timeout=120)
    assert keyless.returncode == 1 and "no API key" in keyless.stdout and f"fix: set ${key_var}" in keyless.stdout
    assert "Traceback" not in keyless.stderr
