#!/usr/bin/env python3
"""Run the queue-workers example end to end on the embedded local cloud, preempting workers.

    SPOTFLEET_HOME=/tmp/qw python examples/queue-workers/run_local.py --tasks 12 --preempt 3

It resets nothing: it opens (or creates) the local cloud under ``$SPOTFLEET_HOME/localcloud``
with real node processes, writes a spec with a head (``queue_head.py``) and workers
(``worker.py``), runs ``fleet up`` (the head first, then the workers with its address), takes
back ``--preempt`` workers one after another with an interruption notice (each gives its task
back at its last step), runs ``fleet up`` again after each loss to replace it, waits until the
head says every task is done, takes the fleet down, and prints one JSON report: time to a
ready fleet, tasks per hour, preemptions, requeues, units of work redone, and whether every
task finished exactly once with the right result.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent

SPEC = """\
name: {name}
backend: local
capacity:
  gpus: {workers}
  accelerators: [H100]
  gpus_per_node: {{min: 1, max: 1}}
diversification: {{max_pool_share: 1, max_zone_share: 1}}
node:
  startup: {worker}
head:
  vcpus: 2
  port: {port}
  startup: {head}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fleet(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fleet.cli.main", *args], capture_output=True, text=True, timeout=300)


def status(port: int) -> dict | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=5) as resp:
            return json.loads(resp.read())
    except OSError:
        return None


def run(args: argparse.Namespace) -> dict:
    from providers.local import LocalCloud

    home = Path(os.environ.get("SPOTFLEET_HOME", Path.home() / ".spotfleet"))
    cloud = LocalCloud.open(home / "localcloud", time_scale=args.time_scale, run_nodes=True)
    port = free_port()
    py = sys.executable
    head = (
        f"exec {py} {HERE / 'queue_head.py'} --port {port} --bind 127.0.0.1 --tasks {args.tasks} "
        f"--units {args.units} --lease-seconds {args.lease_seconds}"
    )
    worker = f"exec {py} {HERE / 'worker.py'} --step-seconds {args.step_seconds} --checkpoint-every 5"
    spec = Path(tempfile.mkdtemp()) / "queue-workers.yaml"
    spec.write_text(
        SPEC.format(name=args.name, workers=args.workers, port=port, worker=json.dumps(worker), head=json.dumps(head))
    )
    started = time.monotonic()
    up = fleet("up", str(spec), "-y", "--json")
    ready = time.monotonic() - started
    if up.returncode != 0:
        raise SystemExit(f"fleet up failed: {up.stderr.strip() or up.stdout.strip()}")
    preempted: list[str] = []
    try:
        deadline = time.monotonic() + args.timeout
        last = None
        while time.monotonic() < deadline:
            last = status(port)
            if last and last["finished"]:
                break
            if (
                len(preempted) < args.preempt
                and last
                and last["done"] >= (len(preempted) + 1) * args.tasks // (args.preempt + 2)
            ):
                victim = _busy_worker(cloud, last)
                if victim is not None:
                    cloud.preempt(victim, notice=True)
                    preempted.append(victim)
                    while cloud.instance_state(victim) in ("pending", "running"):
                        time.sleep(0.1)
                    fleet("up", str(spec), "-y", "--json")  # replace the lost worker
            time.sleep(0.2)
        final = status(port) or {}
    finally:
        fleet("down", args.name, "-y")
    tasks = final.get("tasks", {})
    expected = sum(i * i for i in range(args.units))
    elapsed = final.get("elapsed_seconds") or 0.0
    return {
        "tasks": args.tasks,
        "units": args.units,
        "workers": args.workers,
        "finished": bool(final.get("finished")),
        "exactly_once": bool(tasks) and all(t["completions"] == 1 for t in tasks.values()),
        "results_correct": bool(tasks) and all(t["result"] == expected for t in tasks.values()),
        "refused_completions": final.get("refused_completions"),
        "preemptions": len(preempted),
        "requeues": final.get("requeues"),
        "expired_leases": final.get("expired_leases"),
        "redone_units": final.get("redone_units"),
        "ready_seconds": round(ready, 3),
        "work_seconds": round(elapsed, 3),
        "tasks_per_hour": round(args.tasks / elapsed * 3600, 1) if elapsed else None,
    }


def _busy_worker(cloud, st: dict) -> str | None:
    """A running worker that holds a task now (its loss costs work), else ``None``."""
    holders = {t["worker"] for t in st["tasks"].values() if t["status"] == "leased"}
    alive = {i.id for i in cloud.all_instances(alive_only=True) if i.tags.get("spotfleet:role") != "head"}
    busy = sorted(holders & alive)
    return busy[0] if busy else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--name", default="queue-workers")
    ap.add_argument("--tasks", type=int, default=12)
    ap.add_argument("--units", type=int, default=20)
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--preempt", type=int, default=3, help="workers taken back during the run")
    ap.add_argument("--step-seconds", type=float, default=0.05)
    ap.add_argument("--lease-seconds", type=float, default=5.0)
    ap.add_argument("--time-scale", type=float, default=120.0)
    ap.add_argument("--timeout", type=float, default=180.0)
    print(json.dumps(run(ap.parse_args()), indent=2))


if __name__ == "__main__":
    main()
