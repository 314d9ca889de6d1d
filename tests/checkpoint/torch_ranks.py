"""One rank of a small gloo job on CPU, for the distributed checkpoint tests (runnable on its own).

    python tests/checkpoint/torch_ranks.py SCENARIO RANK WORLD PORT URI

The checkpoint location's credentials/endpoints come from the environment. Each scenario prints
one JSON line with what this rank saw, then exits 0; a failure exits non-zero with the error.

Scenarios:
- ``save``:       save steps 1 and 2 (rank-specific weights), then load into fresh objects.
- ``resume``:     load the newest checkpoint into fresh objects and report the step and weights.
- ``bad-rank``:   save step 1, then step 2 where rank 1's state cannot be stored.
- ``die-writing``: save step 1, then step 2 with a 24 MB state; rank 1 kills itself (SIGKILL)
                  while its shard is being written (local directories only).
- ``dcp``:        ``dcp.save`` of a DTensor sharded over the ranks plus replicated values, steps
                  1 and 2, then ``dcp.load`` into zeroed tensors.
- ``dcp-bad-rank``: a DCP save whose write fails on rank 1 (its storage is broken).
"""

from __future__ import annotations

import datetime
import json
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

import torch
import torch.distributed as dist

from fleet.checkpoint import CheckpointError, CheckpointManager
from fleet.checkpoint.torch import load, save


def weights(rank: int, step: int) -> torch.nn.Linear:
    torch.manual_seed(100 * rank + step)
    return torch.nn.Linear(4, 3)


def digest(model: torch.nn.Module) -> list[float]:
    return [round(float(p.detach().double().sum()), 6) for p in model.parameters()]


def die_while_writing(root: Path, rank: int) -> None:
    """SIGKILL this process as soon as its step-2 shard exists as a partial file."""

    def watch() -> None:
        data = root / "data"
        while True:
            if data.is_dir() and any(
                n.startswith("step-000000000002") and f"-r{rank}.ckpt" in n and n.endswith(".partial")
                for n in os.listdir(data)
            ):
                os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(0.0005)

    threading.Thread(target=watch, daemon=True).start()


def run(scenario: str, rank: int, uri: str) -> dict:
    mgr = CheckpointManager(uri, keep_last=2)
    if scenario == "save":
        for step in (1, 2):
            info = save(mgr, {"model": weights(rank, step), "rank": rank}, step)
        fresh = {"model": torch.nn.Linear(4, 3), "rank": -1}
        _, loaded = load(mgr, fresh)
        return {
            "committed": info.step,
            "objects": len(info.objects),
            "loaded": loaded.step,
            "rank_loaded": fresh["rank"],
            "same": digest(fresh["model"]) == digest(weights(rank, 2)),
        }
    if scenario == "resume":
        fresh = {"model": torch.nn.Linear(4, 3), "rank": -1}
        found = load(mgr, fresh)
        return {
            "loaded": found[1].step if found else None,
            "rank_loaded": fresh["rank"],
            "weights": digest(fresh["model"]),
        }
    if scenario == "bad-rank":
        save(mgr, {"model": weights(rank, 1)}, 1)
        try:
            save(mgr, {"model": weights(rank, 2), "odd": {1, 2} if rank == 1 else None}, 2)
        except CheckpointError as err:
            return {"error": str(err)}
        return {"error": None}
    if scenario == "die-writing":
        save(mgr, {"model": weights(rank, 1), "rank": rank}, 1)
        if rank == 1:
            die_while_writing(Path(uri.removeprefix("file://")), rank)
        save(mgr, {"model": weights(rank, 2), "rank": rank, "big": torch.randn(6_000_000)}, 2)
        return {"error": None}
    if scenario in ("dcp", "dcp-bad-rank"):
        return run_dcp(scenario, rank, mgr)
    raise SystemExit(f"unknown scenario {scenario!r}")


def run_dcp(scenario: str, rank: int, mgr: CheckpointManager) -> dict:
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    from fleet.checkpoint.dcp import StorageReader, StorageWriter

    mesh = init_device_mesh("cpu", (dist.get_world_size(),))

    def state(step: int) -> dict:
        full = torch.arange(12 * 5, dtype=torch.float32).reshape(12, 5) * step
        return {
            "sharded": distribute_tensor(full, mesh, [Shard(0)]),
            "bias": torch.full((3,), float(step)),
            "meta": {"step": step},
        }

    if scenario == "dcp-bad-rank":
        dcp.save(state(1), storage_writer=StorageWriter(mgr, 1))
        writer_mgr = mgr
        if rank == 1:  # rank 1's storage is broken: a file where a directory goes
            blocker = Path(tempfile.mkdtemp()) / "blocker"
            blocker.write_bytes(b"")
            writer_mgr = CheckpointManager(f"file://{blocker}/ckpt")
        try:
            dcp.save(state(2), storage_writer=StorageWriter(writer_mgr, 2))
        except dcp.CheckpointException as err:  # DCP raises every rank's failure on every rank
            return {"error": "; ".join(f"rank {r}: {getattr(e, 'exception', e)}" for r, e in err.failures.items())}
        return {"error": None}
    for step in (1, 2):
        writer = StorageWriter(mgr, step)
        dcp.save(state(step), storage_writer=writer)
    target = {
        "sharded": distribute_tensor(torch.zeros(12, 5), mesh, [Shard(0)]),
        "bias": torch.zeros(3),
        "meta": {"step": 0},
    }
    reader = StorageReader(mgr)
    dcp.load(target, storage_reader=reader)
    expected = state(2)
    return {
        "loaded": reader.info.step if reader.info else None,
        "objects": len(reader.info.objects),
        "shard_equal": torch.equal(target["sharded"].to_local(), expected["sharded"].to_local()),
        "full_equal": torch.equal(target["sharded"].full_tensor(), expected["sharded"].full_tensor()),
        "bias_equal": torch.equal(target["bias"], expected["bias"]),
        "meta": target["meta"],
    }


def main() -> int:
    scenario, rank, world, port, uri = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=60),
    )
    try:
        print(json.dumps({"rank": rank, **run(scenario, rank, uri)}), flush=True)
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # skip interpreter teardown: torch's gloo threads can abort it after a clean run ("terminate
    # called without an active exception", exit -6) once the report above is written
    os._exit(code)
