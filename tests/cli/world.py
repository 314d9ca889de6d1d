"""A throwaway spotfleet world for CLI and chaos tests: a home folder, a local cloud with a
frozen clock (nothing is preempted unless a test says so) and the installed ``fleet``
command run as a real subprocess against them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from fleet.model import Instance
from fleet.state import StateStore, open_store
from providers.local import LocalCloud

FLEET_BIN = str(Path(sys.executable).with_name("fleet"))

#: Five pools or more: 8 nodes of 8 GPUs, 2 of them on-demand, spot over at least 4 pools.
CHAOS_SPEC = """
name: {name}
backend: local
capacity:
  gpus: 64
  accelerators: [H100]
  gpus_per_node: {{min: 8, max: 8}}
  on_demand_gpus: 16
diversification:
  min_pools: 4
  max_pool_share: 0.25
"""


#: Two 8-GPU nodes on spot: the smallest fleet the CLI tests use.
SMALL_SPEC = """
name: {name}
backend: local
capacity:
  gpus: 16
  accelerators: [H100]
  gpus_per_node: {{min: 8, max: 8}}
"""


class World:
    def __init__(self, root: Path, *, time_scale: float = 0.0, seed: int = 0):
        self.root = root
        self.home = root / "home"
        self.cloud = LocalCloud.open(self.home / "localcloud", time_scale=time_scale, seed=seed)
        self.state = self.home / "state.db"

    def env(self, **extra: str) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if k
            not in ("SPOTFLEET_STATE", "SPOTFLEET_LOCAL_CLOUD", "SPOTFLEET_TEST_CRASH_AT", "SPOTFLEET_TEST_PAUSE_AT")
        }
        env.update(SPOTFLEET_HOME=str(self.home), COLUMNS="200", NO_COLOR="1", **extra)
        return env

    def spec(self, name: str = "chaos", text: str = CHAOS_SPEC) -> Path:
        path = self.root / f"{name}.yaml"
        path.write_text(text.format(name=name))
        return path

    def fleet(
        self, *args: str, env: dict[str, str] | None = None, stdin: str | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [FLEET_BIN, *args],
            env=env or self.env(),
            capture_output=True,
            text=True,
            input=stdin if stdin is not None else "",
            timeout=timeout,
        )

    def fleet_json(self, *args: str, ok: tuple[int, ...] = (0,)) -> Any:
        proc = self.fleet(*args, "--json")
        assert proc.returncode in ok, f"fleet {' '.join(args)} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        return json.loads(proc.stdout)

    def spawn(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [FLEET_BIN, *args],
            env=env or self.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )

    def store(self) -> StateStore:
        return open_store(str(self.state), create=False)

    def created(self, fleet: str) -> list[Instance]:
        """Every instance the fleet ever had in the cloud, whatever its state."""
        return [i for i in self.cloud.all_instances() if i.fleet == fleet]

    def alive(self, fleet: str) -> dict[str, int]:
        out: dict[str, int] = {}
        for i in self.cloud.all_instances(alive_only=True):
            if i.fleet == fleet:
                out[i.pool.id] = out.get(i.pool.id, 0) + 1
        return out
