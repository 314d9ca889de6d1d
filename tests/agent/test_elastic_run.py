"""``fleet run --elastic``: the job under torchrun against the head's rendezvous store.

The end-to-end test runs real processes on this host, as the fleet runs them: the head's store
(``python -m fleet.elastic store``) and three workers, each ``fleet run --elastic 2:3`` of
``examples/train_elastic.py`` (CPU, gloo, DCP checkpoints in a local directory). One worker is
preempted (its whole process tree SIGKILLed, as a vanishing machine), training continues at world
size 2 from the last DCP checkpoint, and grows back to 3 when the worker is started again. Every
wait is bounded; the re-rendezvous times are printed, never asserted.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from agent_support import FLEET, ROOT, env, finish, kill_tree, start, wait_until

from fleet import elastic
from fleet.errors import FleetError

TRAIN = ROOT / "examples" / "train_elastic.py"
SAVE_EVERY = 20
WAIT = 120.0  # per phase, on a loaded 2-core machine; the test never waits longer


def cfg(**kwargs) -> elastic.ElasticSettings:
    return elastic.settings("2:4", endpoint="10.0.0.5:29400", run_id="fleet-a", **kwargs)


def test_the_job_runs_under_torchrun_with_the_settings_that_work():
    argv = elastic.torchrun_argv(cfg(), ["python3", "train.py", "--lr", "1"], python="/py")
    assert argv[:3] == ["/py", "-m", "torch.distributed.run"]
    assert argv[-3:] == ["train.py", "--lr", "1"]
    assert {
        "--nnodes=2:4",
        "--rdzv-backend=c10d",
        "--rdzv-endpoint=10.0.0.5:29400",
        "--rdzv-id=fleet-a",
        "--max-restarts=100",
    } <= set(argv)
    conf = dict(
        kv.split("=") for kv in next(a for a in argv if a.startswith("--rdzv-conf=")).split("=", 1)[1].split(",")
    )
    assert conf["is_host"] == "false" and conf["last_call_timeout"] == "1" and conf["keep_alive_interval"] == "1"
    assert elastic.torchrun_argv(cfg(), ["python", "-m", "pkg.train"])[-2:] == ["-m", "pkg.train"]
    assert elastic.torchrun_argv(cfg(), ["./train.sh", "x"])[-3:] == ["--no-python", "./train.sh", "x"]
    assert elastic.torchrun_env({}) == {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}
    assert (
        elastic.torchrun_env({"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "0"})["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "0"
    )


def test_the_endpoint_and_run_id_come_from_the_fleet():
    got = elastic.settings("3", env={"SPOTFLEET_HEAD_ADDR": "10.1.2.3", "SPOTFLEET_FLEET": "f1"})
    assert (got.min_nodes, got.max_nodes, got.endpoint, got.run_id) == (3, 3, "10.1.2.3:29400", "f1")
    with pytest.raises(FleetError, match=r"--rdzv-endpoint HOST:PORT"):
        elastic.settings("2:3", env={"SPOTFLEET_FLEET": "f1"})
    with pytest.raises(FleetError, match=r"--rdzv-id NAME"):
        elastic.settings("2:3", env={"SPOTFLEET_HEAD_ADDR": "h"})
    for bad in ("3:2", "0:2", "two", "2:"):
        with pytest.raises(FleetError, match="1 <= MIN <= MAX"):
            elastic.settings(bad, endpoint="h:1", run_id="r")
    with pytest.raises(FleetError, match="--nproc-per-node"):
        elastic.settings("2", endpoint="h:1", run_id="r", nproc_per_node="0")


def test_fleet_run_refuses_bad_elastic_settings_in_one_line(tmp_path):
    out = subprocess.run(
        [*FLEET, "run", "--cloud", "none", "--elastic", "3:2", "--", "true"],
        env=env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode != 0 and "--elastic takes MIN:MAX nodes" in out.stderr + out.stdout
    assert "Traceback" not in out.stderr


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def store_up(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


class Job:
    """The rank-0 progress lines of the elastic example (JSON, one per event)."""

    def __init__(self, path: Path):
        self.path = path

    def events(self) -> list[dict]:
        if not self.path.exists():
            return []
        lines = self.path.read_text().splitlines()
        return [json.loads(line) for line in lines if line.endswith("}")]

    def first(self, event: str, world: int, after: int) -> dict | None:
        return next((e for e in self.events()[after:] if e["event"] == event and e["world"] == world), None)


@pytest.mark.slow
def test_a_preempted_worker_shrinks_the_job_and_its_replacement_grows_it_back(tmp_path):
    pytest.importorskip("torch")
    port = free_port()
    environ = env(
        tmp_path / "home",
        SPOTFLEET_HEAD_ADDR="127.0.0.1",
        SPOTFLEET_HEAD_PORT=str(port),
        SPOTFLEET_FLEET="elastic-test",
        SPOTFLEET_CHECKPOINT_URI=f"file://{tmp_path}/ckpt",
        PYTHONPATH=str(ROOT),
        OMP_NUM_THREADS="1",
    )
    job = Job(tmp_path / "progress.jsonl")

    def worker(i: int) -> subprocess.Popen[bytes]:
        return start(
            [
                *FLEET,
                "run",
                "--cloud",
                "none",
                "--name",
                f"worker{i}",
                "--max-restarts",
                "0",
                "--elastic",
                "2:3",
                "--",
                sys.executable,
                str(TRAIN),
                "--steps",
                "100000",
                "--save-every",
                str(SAVE_EVERY),
                "--step-time",
                "0.05",
                "--progress",
                str(job.path),
            ],
            tmp_path / f"worker{i}.log",
            environ,
        )

    start([sys.executable, "-m", "fleet.elastic", "store", "--port", str(port)], tmp_path / "head.log", environ)
    wait_until(lambda: store_up(port), WAIT, "the head's rendezvous store")
    workers = [worker(i) for i in range(3)]
    wait_until(
        lambda: any(e["event"] == "step" and e["world"] == 3 and e["step"] > SAVE_EVERY for e in job.events()),
        WAIT,
        "training at world size 3 past a checkpoint",
    )

    seen = len(job.events())
    kill_tree(workers[2].pid)  # preempted: the machine is gone
    killed_at = time.time()
    assert workers[2].wait(timeout=30) != 0
    last_before = max(e["step"] for e in job.events()[:seen] if e["event"] == "step")
    shrunk = wait_until(lambda: job.first("start", 2, seen), WAIT, "a restart at world size 2")
    assert 0 < shrunk["resumed_from"] and shrunk["resumed_from"] % SAVE_EVERY == 0
    assert shrunk["resumed_from"] >= last_before - 2 * SAVE_EVERY  # the last checkpoint, not an old one
    first_small = wait_until(lambda: job.first("step", 2, seen), WAIT, "a step at world size 2")
    assert first_small["step"] == shrunk["resumed_from"] + 1

    seen = len(job.events())
    workers[2] = worker(2)  # the rebalancer's replacement
    replaced_at = time.time()
    grown = wait_until(lambda: job.first("start", 3, seen), WAIT, "a restart at world size 3")
    assert grown["resumed_from"] > shrunk["resumed_from"]  # from a checkpoint saved at world size 2
    first_big = wait_until(lambda: job.first("step", 3, seen), WAIT, "a step at world size 3")
    assert first_big["step"] == grown["resumed_from"] + 1

    for w in workers:
        w.send_signal(signal.SIGTERM)  # forwarded to torchrun, which stops its workers
    for w in workers:
        finish(w, timeout=60)
    print(
        f"\nelastic: shrink 3->2 first step after {first_small['t'] - killed_at:.1f} s; "
        f"grow 2->3 first step after {first_big['t'] - replaced_at:.1f} s (replacement start included)"
    )
