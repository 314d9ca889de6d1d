"""`fleet up` of 500 instances over 20 pools, parallel against one pool at a time, and
`fleet status` latency for a 1,000-instance fleet, on the embedded local cloud.

Every figure comes from the installed ``fleet`` command run as a subprocess (what a user
waits for, Python start-up included) and, for the launch phase alone, from the executor
in-process on the same plan. The local cloud answers in microseconds, so the launch
comparison is also run with a simulated API round trip per call (``--latency``, 0.2 s by
default: a quick cloud API). Spot capacity is pinned so that exactly 20 pools can take 25
each (40 for the 1,000-instance fleet) and the planner has to spread the fleet over them.

Run: ``python benchmarks/lifecycle.py`` (about a minute on two cores). Prints the figures
and saves ``benchmarks/results/lifecycle.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fleet.catalog import Catalog, filter_for_spec
from fleet.model import Market
from fleet.planning.planner import plan as make_plan
from fleet.provisioning.executor import apply
from fleet.spec import parse_spec
from fleet.state import open_store
from providers.base import OfferQuery
from providers.local import LocalCloud

RESULTS = Path(__file__).parent / "results" / "lifecycle.json"
FLEET_BIN = str(Path(sys.executable).with_name("fleet"))

SPEC = """
name: {name}
backend: local
capacity:
  gpus: {gpus}
  accelerators: [H100]
  gpus_per_node: {{min: 8, max: 8}}
providers:
  aws: {{on_demand: false}}
  gcp: {{on_demand: false}}
  azure: {{on_demand: false}}
diversification:
  min_pools: {pools}
  max_pool_share: {share}
"""


class World:
    """A home folder whose local cloud has a frozen clock, pinned spot capacity and ``latency``."""

    def __init__(self, root: Path, *, latency: float, instances: int, pools: int):
        self.root = root
        self.home = root / "home"
        self.cloud = LocalCloud.open(self.home / "localcloud", time_scale=0, seed=0, api_latency=latency)
        self.name = f"bench{instances}"
        self.spec_path = root / "spec.yaml"
        self.spec_path.write_text(SPEC.format(name=self.name, gpus=8 * instances, pools=pools, share=1 / pools))
        self.spec = parse_spec(self.spec_path.read_text())
        self.providers = {n: self.cloud.provider(n) for n in self.cloud.provider_names()}
        per_pool = instances // pools
        spot = sorted(o.pool.id for o in self._offers() if o.market is Market.SPOT)
        for pool_id in spot:
            self.cloud.set_capacity(pool_id, per_pool)
        # a pool whose trace is unavailable right now has no capacity whatever the pin says
        open_now = sorted(o.pool.id for o in self._offers() if o.market is Market.SPOT and o.capacity_hint)
        if len(open_now) < pools:
            raise SystemExit(f"only {len(open_now)} spot pools are open at the start; the benchmark needs {pools}")
        for pool_id in open_now[pools:]:  # exactly `pools` pools can take `per_pool` each; the rest none
            self.cloud.set_capacity(pool_id, 0)

    def _offers(self):
        offers, _ = Catalog(providers=self.providers).offers(OfferQuery(accelerators=("H100",)))
        return filter_for_spec(offers, self.spec)

    def plan(self):
        return make_plan(self.spec, self._offers())

    def fleet(self, *args: str) -> tuple[float, dict]:
        env = {**os.environ, "SPOTFLEET_HOME": str(self.home)}
        env.pop("SPOTFLEET_STATE", None)
        env.pop("SPOTFLEET_LOCAL_CLOUD", None)
        started = time.perf_counter()
        proc = subprocess.run([FLEET_BIN, *args, "--json"], env=env, capture_output=True, text=True, timeout=600)
        elapsed = time.perf_counter() - started
        if proc.returncode != 0:
            raise SystemExit(f"fleet {' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
        return elapsed, json.loads(proc.stdout)


def cli_up(tmp: Path, tag: str, latency: float, parallel: int) -> tuple[float, dict]:
    world = World(tmp / tag, latency=latency, instances=500, pools=20)
    seconds, report = world.fleet(
        "up", str(world.spec_path), "--yes", "--parallel", str(parallel), "--max-cost", "1000000"
    )
    assert report["ok"] and len(report["launched"]) == 500 and len(report["desired"]) == 20, report
    return seconds, report


def executor_up(tmp: Path, tag: str, latency: float, workers: int) -> float:
    world = World(tmp / tag, latency=latency, instances=500, pools=20)
    plan = world.plan()
    assert sum(plan.counts().values()) == 500 and len(plan.counts()) == 20
    store = open_store(str(world.home / "state.db"))
    started = time.perf_counter()
    report = apply(plan, world.providers, store, max_workers=workers)
    elapsed = time.perf_counter() - started
    assert report.ok and len(report.launched) == 500
    store.close()
    return elapsed


def status_latency(tmp: Path, repeat: int) -> dict[str, float]:
    from fleet.cli.app import App
    from fleet.cli.status import snapshot

    world = World(tmp / "status", latency=0.0, instances=1000, pools=40)
    _, report = world.fleet("up", str(world.spec_path), "--yes", "--max-cost", "1000000")
    assert report["ok"] and len(report["launched"]) == 1000
    cli = [world.fleet("status", world.name)[0] for _ in range(repeat)]
    app = App(home=world.home)
    store = open_store(str(world.home / "state.db"))
    inproc = []
    for _ in range(repeat):
        started = time.perf_counter()
        data, _ = snapshot(app, store, world.name)
        inproc.append(time.perf_counter() - started)
        assert data["running"] == 1000
    store.close()
    help_runs = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run([FLEET_BIN, "--help"], capture_output=True, check=True)
        help_runs.append(time.perf_counter() - started)
    return {
        "status_1000_cli_median_s": statistics.median(cli),
        "status_1000_in_process_median_s": statistics.median(inproc),
        "fleet_help_startup_median_s": statistics.median(help_runs),
    }


def main() -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=0.2, help="simulated seconds per cloud API call")
    parser.add_argument("--repeat", type=int, default=5, help="status runs to take the median of")
    args = parser.parse_args()
    out: dict[str, float] = {"api_latency_s": args.latency}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        for latency, label in ((0.0, "no_latency"), (args.latency, "with_latency")):
            seq = executor_up(tmp, f"ex-seq-{label}", latency, 1)
            par = executor_up(tmp, f"ex-par-{label}", latency, 32)
            out[f"executor_500x20_sequential_{label}_s"] = seq
            out[f"executor_500x20_parallel_{label}_s"] = par
            out[f"executor_500x20_speedup_{label}"] = seq / par
            cli_seq, _ = cli_up(tmp, f"cli-seq-{label}", latency, 1)
            cli_par, report = cli_up(tmp, f"cli-par-{label}", latency, 32)
            out[f"fleet_up_500x20_sequential_{label}_s"] = cli_seq
            out[f"fleet_up_500x20_parallel_{label}_s"] = cli_par
            out[f"fleet_up_500x20_speedup_{label}"] = cli_seq / cli_par
        out.update(status_latency(tmp, args.repeat))
    return out


if __name__ == "__main__":
    figures = main()
    width = max(map(len, figures))
    for key, value in figures.items():
        print(f"{key:<{width}}  {value:.3f}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "machine": platform.platform(),
                "python": platform.python_version(),
                "cores": os.cpu_count(),
                "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "figures": figures,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"saved {RESULTS}")
