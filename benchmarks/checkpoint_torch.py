#!/usr/bin/env python3
"""PyTorch checkpoint times: ``fleet.checkpoint.torch`` save/load and DCP through ``fleet.checkpoint.dcp``.

A model of ``--size-mb`` (default ~100 MB of float32 Linear weights) is saved and loaded back
into a fresh model (in place), ``--repeats`` times each, on a local directory and on S3 (moto in a
child process), with:

- torch:  ``fleet.checkpoint.torch.save(mgr, {"model": model}, step)`` / ``load(mgr, target)``;
- dcp:    ``dcp.save(model.state_dict(), storage_writer=StorageWriter(mgr, step))`` /
          ``dcp.load(target, storage_reader=StorageReader(mgr))`` (one process);
- plain:  ``torch.save(model.state_dict(), file)`` + fsync / ``torch.load`` + ``load_state_dict``
          (local directory only, the reference a PyTorch user knows).

Medians in seconds and MB/s. Prints a table and writes benchmarks/results/checkpoint_torch.json.

    python benchmarks/checkpoint_torch.py [--size-mb 100] [--repeats 3] [--stores file,s3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch
import torch.distributed.checkpoint as dcp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "fakes"))

import storage_emulators as emu  # noqa: E402

from fleet.checkpoint import CheckpointManager  # noqa: E402
from fleet.checkpoint.dcp import StorageReader, StorageWriter  # noqa: E402
from fleet.checkpoint.torch import load, save  # noqa: E402

MB = 1_000_000
WIDTH = 2048


def build(size_mb: int, seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    layers = max(1, round(size_mb * MB / (4 * (WIDTH * WIDTH + WIDTH))))
    return torch.nn.Sequential(*[torch.nn.Linear(WIDTH, WIDTH) for _ in range(layers)])


def nbytes(model: torch.nn.Module) -> int:
    return sum(t.numel() * t.element_size() for t in model.state_dict().values())


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def bench(uri: str, env: dict[str, str], model: torch.nn.Module, target: torch.nn.Module, repeats: int) -> dict:
    mgr = CheckpointManager(uri, env=env, keep_last=1)
    runs: dict[str, list[float]] = {k: [] for k in ("torch_save_s", "torch_load_s", "dcp_save_s", "dcp_load_s")}
    step = 0
    for _ in range(repeats):
        step += 1
        runs["torch_save_s"].append(timed(lambda: save(mgr, {"model": model}, step)))
        runs["torch_load_s"].append(timed(lambda: load(mgr, {"model": target})))
        assert all(torch.equal(a, b) for a, b in zip(model.parameters(), target.parameters()))
    dcp_mgr = CheckpointManager(f"{uri}-dcp", env=env, keep_last=1)
    for _ in range(repeats):
        step += 1
        writer = StorageWriter(dcp_mgr, step)
        runs["dcp_save_s"].append(timed(lambda: dcp.save(model.state_dict(), storage_writer=writer)))
        sd = target.state_dict()
        runs["dcp_load_s"].append(timed(lambda: dcp.load(sd, storage_reader=StorageReader(dcp_mgr))))
    return {k: statistics.median(v) for k, v in runs.items()} | {"runs": runs}


def bench_plain(directory: str, model: torch.nn.Module, target: torch.nn.Module, repeats: int) -> dict:
    path = Path(directory) / "plain.pt"
    save_s, load_s = [], []

    def put() -> None:
        with open(path, "wb") as f:
            torch.save(model.state_dict(), f)
            f.flush()
            os.fsync(f.fileno())

    for _ in range(repeats):
        save_s.append(timed(put))
        load_s.append(timed(lambda: target.load_state_dict(torch.load(path, weights_only=True))))
    return {"torch_save_s": statistics.median(save_s), "torch_load_s": statistics.median(load_s),
            "runs": {"torch_save_s": save_s, "torch_load_s": load_s}}


def main() -> int:
    ap = argparse.ArgumentParser(description="PyTorch / DCP checkpoint benchmark")
    ap.add_argument("--size-mb", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--stores", default="file,s3")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "checkpoint_torch.json"))
    args = ap.parse_args()
    warnings.filterwarnings("ignore", category=UserWarning)          # DCP: no process group
    model, target = build(args.size_mb, 0), build(args.size_mb, 1)
    size = nbytes(model)
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="ckpt-torch-bench-", dir=os.environ.get("BENCH_TMP")) as tmp:
        results["plain_torch_save_local"] = bench_plain(tmp, model, target, args.repeats)
        for kind in filter(None, args.stores.split(",")):
            em = emu.start_moto_process() if kind == "s3" else None
            try:
                uri, env = (em.bucket_uri("bench-torch", "run"), em.env) if em else (f"file://{tmp}/store", {})
                results[kind] = bench(uri, env, model, target, args.repeats)
            finally:
                if em is not None:
                    em.stop()
    for name, r in results.items():
        cells = "  ".join(f"{k[:-2]} {v:.2f} s ({size / MB / v:.0f} MB/s)" for k, v in r.items() if k != "runs")
        print(f"{name:<24} {cells}", flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    machine = {"cpus": os.cpu_count(), "load_average_1m": os.getloadavg()[0], "python": platform.python_version(),
               "platform": platform.platform()}
    out.write_text(json.dumps({"benchmark": "checkpoint_torch", "bytes": size, "repeats": args.repeats,
                               "torch": torch.__version__, "machine": machine, "results": results,
                               "notes": "medians; moto runs in a child process on the same machine"},
                              indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
