"""Elastic PyTorch training on a fleet: the job under torchrun, rendezvous on the head's store.

``fleet run --elastic MIN:MAX -- python train.py`` on every worker runs the job as::

    python -m torch.distributed.run --nnodes=MIN:MAX --nproc-per-node=N --max-restarts=100
        --rdzv-backend=c10d --rdzv-endpoint=$SPOTFLEET_HEAD_ADDR:$SPOTFLEET_HEAD_PORT
        --rdzv-id=$SPOTFLEET_FLEET --rdzv-conf=is_host=false,last_call_timeout=1,... train.py

and the head serves the rendezvous store (``head.startup: python -m fleet.elastic store --port 29400``),
so no spot worker is special and the rendezvous outlives every worker. When a worker goes, the
others' collectives fail, torchrun restarts them at the smaller world size (at least MIN nodes);
when a replacement starts, the running agents see it waiting and restart at the larger size.
Each restart is a fresh start of the script, which resumes from its newest checkpoint.

Settings that make this work and make it short (torch's defaults hung 2 of 3 times in a trial,
and here took 40 s from a lost node to the next round: 15 s to drop it, 30 s of last call):

- ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1``: each round's rank 0 starts a fresh store for the
  workers instead of sharing the one its agent started in the first round; with sharing, when the
  lost node was rank 0, the survivors' next round still points its workers at the dead node's
  store and they hang in 60 s connect timeouts, retried (seen on torch 2.13).
- ``is_host=false``: the agents are clients of the head's store, never a host of their own (on
  one machine every agent would otherwise match the endpoint's host name).
- ``last_call_timeout=1`` (torch: 30 s): once MIN nodes are in, wait 1 s for more, not 30.
- ``keep_alive_interval=1``, ``keep_alive_max_attempt=3`` (torch: 5 s x 3): a lost node is
  dropped from the rendezvous after 3 s, not 15.
- ``close_timeout=10``, ``join_timeout=600``; ``--monitor-interval=0.5``; ``--max-restarts=100``
  (membership changes do not count; crashes do).

Elastic jobs must save with :mod:`fleet.checkpoint.dcp` (DCP reshards on load): the plain sharded
save of :mod:`fleet.checkpoint.torch` loads only at the world size that saved it.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import signal
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass

from fleet.errors import FleetError

SHARE_STORE_ENV = "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"
DEFAULT_PORT = 29400
_NNODES = re.compile(r"^(\d+)(?::(\d+))?$")
_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")


@dataclass(frozen=True)
class ElasticSettings:
    """One node's torchrun settings (see the module docstring for why each value)."""

    min_nodes: int
    max_nodes: int
    endpoint: str  # host:port of the head's store
    run_id: str
    nproc_per_node: str = "1"
    max_restarts: int = 100
    monitor_interval: float = 0.5
    join_timeout: int = 600
    last_call_timeout: int = 1
    close_timeout: int = 10
    keep_alive_interval: int = 1
    keep_alive_max_attempt: int = 3

    def rdzv_conf(self) -> str:
        return (
            f"is_host=false,join_timeout={self.join_timeout},last_call_timeout={self.last_call_timeout},"
            f"close_timeout={self.close_timeout},keep_alive_interval={self.keep_alive_interval},"
            f"keep_alive_max_attempt={self.keep_alive_max_attempt}"
        )


def parse_nnodes(text: str) -> tuple[int, int]:
    """``"2:8"`` -> (2, 8); ``"4"`` -> (4, 4). Raises ValueError with the fix."""
    match = _NNODES.match(text.strip())
    low = int(match.group(1)) if match else 0
    high = int(match.group(2) or low) if match else 0
    if not match or low < 1 or high < low:
        raise ValueError(f"--elastic takes MIN:MAX nodes with 1 <= MIN <= MAX (like 2:8), got {text!r}")
    return low, high


def settings(
    nnodes: str,
    *,
    endpoint: str | None = None,
    run_id: str | None = None,
    nproc_per_node: str = "1",
    env: Mapping[str, str] | None = None,
) -> ElasticSettings:
    """Settings for this node: the endpoint defaults to ``$SPOTFLEET_HEAD_ADDR:$SPOTFLEET_HEAD_PORT``
    (port 29400 when unset), the run id to ``$SPOTFLEET_FLEET``. Raises :class:`FleetError` naming
    the missing value and the flag that gives it."""
    env = os.environ if env is None else env
    try:
        low, high = parse_nnodes(nnodes)
    except ValueError as err:
        raise FleetError(str(err)) from None
    if not endpoint:
        head = env.get("SPOTFLEET_HEAD_ADDR", "")
        if not head:
            raise FleetError(
                "--elastic needs the rendezvous store's address: run it on a worker of a fleet "
                "with a head ($SPOTFLEET_HEAD_ADDR) or pass --rdzv-endpoint HOST:PORT"
            )
        endpoint = f"{head}:{env.get('SPOTFLEET_HEAD_PORT') or DEFAULT_PORT}"
    run_id = run_id or env.get("SPOTFLEET_FLEET", "")
    if not run_id:
        raise FleetError(
            "--elastic needs a run id shared by every node: pass --rdzv-id NAME (default $SPOTFLEET_FLEET)"
        )
    if not (nproc_per_node.isdigit() and int(nproc_per_node) > 0) and nproc_per_node not in ("gpu", "cpu", "auto"):
        raise FleetError(f"--nproc-per-node takes a count >= 1 or gpu/cpu/auto, got {nproc_per_node!r}")
    return ElasticSettings(low, high, endpoint, run_id, nproc_per_node=nproc_per_node)


def torchrun_argv(cfg: ElasticSettings, job: list[str], python: str = sys.executable) -> list[str]:
    """The command that runs ``job`` under torchrun with ``cfg``. ``python X.py ...`` and
    ``python -m M ...`` run as torchrun's own script/module; any other command with ``--no-python``."""
    head = [
        python,
        "-m",
        "torch.distributed.run",
        f"--nnodes={cfg.min_nodes}:{cfg.max_nodes}",
        f"--nproc-per-node={cfg.nproc_per_node}",
        f"--max-restarts={cfg.max_restarts}",
        f"--monitor-interval={cfg.monitor_interval}",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint={cfg.endpoint}",
        f"--rdzv-id={cfg.run_id}",
        f"--rdzv-conf={cfg.rdzv_conf()}",
    ]
    if len(job) > 1 and _PYTHON.match(os.path.basename(job[0])):
        rest = job[1:]
        return [*head, "-m", *rest[1:]] if rest[0] == "-m" and len(rest) > 1 else [*head, *rest]
    return [*head, "--no-python", *job]


def torchrun_env(env: Mapping[str, str]) -> dict[str, str]:
    """The variables torchrun needs on top of ``env`` (a value the user set is kept)."""
    return {SHARE_STORE_ENV: env.get(SHARE_STORE_ENV, "1")}


def check_torch() -> None:
    """Raises :class:`FleetError` when PyTorch (torchrun) is not importable here."""
    if importlib.util.find_spec("torch") is None:
        raise FleetError(
            "--elastic runs the job under torchrun, which needs PyTorch on this node: pip install 'spotfleet[torch]'"
        )


def serve_store(port: int, host: str = "0.0.0.0") -> None:
    """Serve the rendezvous store on ``host:port`` until SIGTERM/SIGINT (the head's job)."""
    from torch.distributed import TCPStore

    store = TCPStore(host, port, is_master=True, wait_for_workers=False, multi_tenant=True)
    stop = {"now": False}

    def handle(signum: int, frame: object) -> None:
        stop["now"] = True

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, handle)
    print(f"rendezvous store listening on {host}:{store.port}", flush=True)
    while not stop["now"]:
        time.sleep(0.2)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m fleet.elastic", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    store = sub.add_parser("store", help="serve the rendezvous store (run it on the head)")
    store.add_argument("--port", type=int, default=DEFAULT_PORT)
    store.add_argument("--host", default="0.0.0.0")
    args = parser.parse_args(argv)
    serve_store(args.port, args.host)


if __name__ == "__main__":
    main()
