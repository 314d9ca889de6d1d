"""Elastic data-parallel training that keeps going when nodes go and come (CPU/gloo or GPU/NCCL).

Run it on every worker under the fleet's elastic mode (the head serves the rendezvous store)::

    fleet run --elastic 2:8 --nproc-per-node 8 -- python examples/train_elastic.py --steps 100000

Every (re)start of the script is one rendezvous round: it resumes from the newest checkpoint
through ``torch.distributed.checkpoint`` on the fleet's storage (``fleet.checkpoint.dcp``), which
reshards to the current world size, so a round with fewer or more ranks continues where the last
checkpoint left off. ``--progress FILE`` appends one JSON line per event on rank 0 (``start``:
the world size and the step resumed from; ``step``: each step's world size), for tests and plots.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp

from fleet.checkpoint import CheckpointManager
from fleet.checkpoint.dcp import StorageReader, StorageWriter


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--save-every", type=int, default=10)
    parser.add_argument("--step-time", type=float, default=0.0, help="extra seconds per step (a slower model)")
    parser.add_argument("--progress", default="", help="append JSON lines here from rank 0")
    args = parser.parse_args()

    backend = "nccl" if torch.cuda.is_available() else "gloo"
    dist.init_process_group(backend, timeout=timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if backend == "nccl" else torch.device("cpu")
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 1).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    mgr = CheckpointManager(keep_last=3)  # $SPOTFLEET_CHECKPOINT_URI, set by fleet run
    state = {"model": model.state_dict(), "step": torch.zeros((), dtype=torch.int64)}

    box = [mgr.latest() is not None if rank == 0 else None]
    dist.broadcast_object_list(box, src=0)  # every rank agrees whether to resume
    if box[0]:
        dcp.load(state, storage_reader=StorageReader(mgr))  # in place, resharded to this world size
    resumed = int(state["step"])

    def record(**event: object) -> None:
        if rank == 0 and args.progress:
            with open(args.progress, "a") as out:
                out.write(json.dumps({**event, "world": world, "t": time.time()}) + "\n")

    record(event="start", resumed_from=resumed, restart=int(os.environ.get("TORCHELASTIC_RESTART_COUNT", 0)))
    for step in range(resumed + 1, args.steps + 1):
        g = torch.Generator().manual_seed(step * 1000 + rank)
        x = torch.randn(32, 16, generator=g).to(device)
        loss = torch.nn.functional.mse_loss(model(x), x.sum(1, keepdim=True))
        opt.zero_grad()
        loss.backward()
        for p in model.parameters():  # data parallel: average the gradients
            dist.all_reduce(p.grad)
            p.grad /= world
        opt.step()
        record(event="step", step=step, loss=loss.item())
        if step % args.save_every == 0:
            state["step"].fill_(step)
            dcp.save(state, storage_writer=StorageWriter(mgr, step))
        if args.step_time:
            time.sleep(args.step_time)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
