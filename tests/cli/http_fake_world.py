"""A ``fleet`` world on ``backend: cloud`` against one HTTP fake in tests/fakes (RunPod, and any
REST fake with a ``/_control`` API): a home folder, the spec, the fake's control calls, and the
installed ``fleet`` command as a real subprocess with the fake's URL and key in its environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Mapping

import httpx

FLEET_BIN = str(Path(sys.executable).with_name("fleet"))


class HttpFakeWorld:
    """``root``: the test's folder; ``url``: the fake; ``env``: the variables that point ``fleet`` at
    it (its URL and key); ``drop``: prefixes of this machine's variables to leave out (the real
    vendor's keys)."""

    def __init__(self, root: Path, url: str, spec: str, *, env: Mapping[str, str], drop: tuple[str, ...] = (),
                 name: str = "spec.yaml"):
        self.root, self.url = root, url
        self.home = root / "home"
        self.spec = root / name
        self.spec.write_text(spec)
        self._env = dict(env)
        self._drop = ("SPOTFLEET_", *drop)

    def control(self, path: str, body: Any = None) -> Any:
        url = f"{self.url}/_control/{path}"
        resp = httpx.post(url, json=body) if body is not None else httpx.get(url)
        resp.raise_for_status()
        return resp.json()

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(self._drop)}
        env.update({"SPOTFLEET_HOME": str(self.home), "HOME": str(self.root), "COLUMNS": "200", "NO_COLOR": "1",
                    **self._env, **extra})
        return env

    def fleet(self, *args: str, env: Mapping[str, str] | None = None, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([FLEET_BIN, *args], env=dict(env) if env is not None else self.env(**extra),
                              capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=180)

    def fleet_json(self, *args: str, ok: tuple[int, ...] = (0,), **extra: str) -> Any:
        proc = self.fleet(*args, "--json", **extra)
        assert proc.returncode in ok, f"fleet {' '.join(args)} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        return json.loads(proc.stdout)
