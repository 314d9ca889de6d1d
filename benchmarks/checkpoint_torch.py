#!/usr/bin/env python3
"""PyTorch checkpoints against what a user would otherwise write, as ratios (goal: each <= 1.1).

For each state size (``--sizes-mb``, default 1000 and 2000 MB of float32 ``Linear`` weights):

- local directory, one process, ``--repeats`` rounds interleaved (medians):
  save ``fleet.checkpoint.torch.save(mgr, {"model": model}, step)`` vs ``torch.save`` + fsync;
  load ``load(mgr, {"model": target})`` vs ``target.load_state_dict(torch.load(path))``; wall time
  and the process's CPU time (steadier on a shared machine);
  ``save(..., background=True)``: how long the call blocks, as a share of the same round's
  synchronous save, with the fork snapshot (the default) and with ``snapshot="copy"``;
- peak host memory (``VmHWM`` of a child process that builds the model and saves it once; its
  ``ru_maxrss`` is recorded too, but starts at the parent's size at the fork) of our save vs
  ``torch.save``; and of ``background=True`` with the fork snapshot while the caller rewrites
  every weight right after the call (the worst case of copy-on-write: the parent's ``VmHWM``
  plus the writer child's peak private memory, sampled from ``/proc/<pid>/smaps_rollup``) and
  with the copy snapshot;
- ``background=True`` inside a training loop (``training``): a fresh process trains a model with
  SGD and momentum (the state: weights plus momentum, the size given; the process also holds the
  gradients), and each round times a synchronous save, then how long ``background=True`` blocks
  while the next step rewrites every weight during the write; its share of the synchronous save
  and the process's resident memory at the fork (a fork's cost follows the resident memory).
  It runs twice, in two fresh processes: with the huge-page fold off (``SPOTFLEET_HUGEPAGES=0``,
  the fork snapshot alone), then on (the default);
- every fork snapshot is followed by its huge-page fold (``fleet.checkpoint.hugepages``): the
  benchmark lets it finish (``mgr.wait()``) before the next timed save, and records its time
  (``fold_s``) and what it folded (``fold_gb``); the first background save of a process forks
  before any fold (``async_block_share_first``);
- DCP at 4 gloo ranks (child processes, each holding a quarter of the state):
  ``dcp.save``/``dcp.load`` with our ``StorageWriter``/``StorageReader`` vs DCP's
  ``FileSystemWriter``/``FileSystemReader`` (slowest rank, medians);
- S3 (moto in a child process): our save/load vs raw boto3 ``upload_fileobj``/``download_fileobj``
  of the same number of bytes with the same transfer settings; ``background=True``'s blocking
  share (fork and copy) and the whole background save (the child stages the bytes in memory, the
  parent uploads them) over the synchronous save;
- the largest state that commits inside a 30 s and a 120 s notice on each store, from the measured
  save throughput of the largest size (an estimate: throughput times the window).

Prints a table and writes benchmarks/results/checkpoint_torch.json::

    python benchmarks/checkpoint_torch.py [--sizes-mb 1000,2000] [--repeats 3] [--parts local,memory,training,dcp,s3]
        [--merge]       # measure some parts now, keep the others' figures in the JSON
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "fakes"))
sys.path.insert(0, str(ROOT))

from fleet.checkpoint import CheckpointManager  # noqa: E402
from fleet.checkpoint.codec import walk  # noqa: E402
from fleet.checkpoint.dcp import StorageReader, StorageWriter  # noqa: E402
from fleet.checkpoint.tensors import to_storable  # noqa: E402
from fleet.checkpoint.torch import load, save  # noqa: E402

MB = 1_000_000
WIDTH = 2048
WINDOWS = (30, 120)


def build(size_mb: float, seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    layers = max(1, round(size_mb * MB / (4 * (WIDTH * WIDTH + WIDTH))))
    return torch.nn.Sequential(*[torch.nn.Linear(WIDTH, WIDTH) for _ in range(layers)])


def nbytes(model: torch.nn.Module) -> int:
    return sum(t.numel() * t.element_size() for t in model.state_dict().values())


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def timed_cpu(runs: dict[str, list[float]], name: str, fn) -> None:
    """Append ``fn``'s wall time to ``runs[name + "_s"]`` and this process's CPU time (every
    thread, user + system: the kernel's copies into the page cache count) to ``runs[name + "_cpu_s"]``.
    On a loaded machine wall time swings with the neighbours; CPU time much less."""
    c0, t0 = time.process_time(), time.perf_counter()
    fn()
    runs[f"{name}_s"].append(time.perf_counter() - t0)
    runs[f"{name}_cpu_s"].append(time.process_time() - c0)


def med(values: list[float]) -> float:
    return statistics.median(values)


def encoded_size(state: dict) -> int:
    """Bytes of the data object a save of ``state`` writes (what the raw transfer moves too)."""
    return walk(to_storable(state)).size


def alternating(pair: dict, round_index: int) -> list:
    """The pair's keys, in the other order every other round: whichever runs first in a round
    meets the page cache and the emulator as the previous round left them, so neither side
    always gets the better (or worse) slot."""
    names = list(pair)
    return names if round_index % 2 == 0 else names[::-1]


def fsync_save(obj, path: Path) -> None:
    with open(path, "wb") as f:
        torch.save(obj, f)
        f.flush()
        os.fsync(f.fileno())


def bench_local(tmp: str, size_mb: float, repeats: int) -> dict:
    model, target = build(size_mb, 0), build(size_mb, 1)
    mgr = CheckpointManager(f"file://{tmp}/store-{size_mb:g}", keep_last=1)
    copying = CheckpointManager(f"file://{tmp}/copy-{size_mb:g}", keep_last=1, snapshot="copy")
    path = Path(tmp) / "plain.pt"
    runs: dict[str, list[float]] = {
        f"{k}{unit}": [] for k in ("torch_save", "ours_save", "torch_load", "ours_load") for unit in ("_s", "_cpu_s")
    }
    runs |= {"async_block_s": [], "async_total_s": [], "async_copy_block_s": []}
    step = 0
    for i in range(repeats):
        step += 1
        saves = {
            "torch_save": lambda: fsync_save(model.state_dict(), path),
            "ours_save": lambda: save(mgr, {"model": model}, step),
        }
        for name in alternating(saves, i):
            timed_cpu(runs, name, saves[name])
        loads = {
            "torch_load": lambda: target.load_state_dict(torch.load(path, weights_only=True)),
            "ours_load": lambda: load(mgr, {"model": target}),
        }
        for name in alternating(loads, i):
            timed_cpu(runs, name, loads[name])
        assert all(torch.equal(a, b) for a, b in zip(model.parameters(), target.parameters()))
        step += 1
        background(runs, mgr, model, step, "fork")
        background(runs, copying, model, step, "copy")
    path.unlink(missing_ok=True)
    mgr.close()
    copying.close()
    return summary(runs, "torch_save_s", "torch_load_s")


def background(runs: dict[str, list[float]], mgr: CheckpointManager, model, step: int, snapshot: str) -> None:
    """One ``save(..., background=True)``: how long it blocks (``async_block_s``, or
    ``async_copy_block_s`` for the copy snapshot) and, for the fork snapshot, until it is committed."""
    resident = resident_gb()
    t0 = time.perf_counter()
    future = save(mgr, {"model": model}, step, background=True)
    blocked = time.perf_counter() - t0
    assert mgr.last_snapshot is not None and mgr.last_snapshot.mode == snapshot, mgr.last_snapshot
    future.result()
    if snapshot == "fork":
        runs["async_block_s"].append(blocked)
        runs["async_total_s"].append(time.perf_counter() - t0)
        runs.setdefault("resident_gb", []).append(resident)  # what the fork copies page tables for
        fold(runs, mgr)
    else:
        runs["async_copy_block_s"].append(blocked)


def fold(runs: dict[str, list[float]], mgr: CheckpointManager) -> None:
    """Let the huge-page fold that follows a fork snapshot finish (``mgr.wait()``), so the next
    timed save does not share the CPU with it; record how long it took and what it folded."""
    t0 = time.perf_counter()
    mgr.wait()
    runs.setdefault("fold_wait_s", []).append(time.perf_counter() - t0)
    done = mgr.last_fold
    if done is not None:
        runs.setdefault("fold_s", []).append(done.seconds)
        runs.setdefault("fold_gb", []).append(done.folded * 2 * 1024 * 1024 / 1e9)


def summary(runs: dict[str, list[float]], save_base: str, load_base: str) -> dict:
    """Medians, our save and load as ratios of the alternative's, the async block share."""
    out = {k: med(v) for k, v in runs.items()}
    out["save_ratio"] = out["ours_save_s"] / out[save_base]
    out["load_ratio"] = out["ours_load_s"] / out[load_base]
    # paired: each round's ratio (both sides met the same machine state), and their median
    for what, base in (("save", save_base), ("load", load_base)):
        rounds = [a / b for a, b in zip(runs[f"ours_{what}_s"], runs[base])]
        out[f"{what}_ratio_rounds"] = rounds
        out[f"{what}_ratio_paired"] = med(rounds)
    if "ours_save_cpu_s" in out:
        out["save_cpu_ratio"] = out["ours_save_cpu_s"] / out[save_base.removesuffix("_s") + "_cpu_s"]
        out["load_cpu_ratio"] = out["ours_load_cpu_s"] / out[load_base.removesuffix("_s") + "_cpu_s"]
    if "async_block_s" in out:
        out["async_block_share"] = out["async_block_s"] / out["ours_save_s"]
        # each round's share of that round's synchronous save (the page cache makes saves swing)
        out["async_block_share_rounds"] = [b / s for b, s in zip(runs["async_block_s"], runs["ours_save_s"])]
    if "async_copy_block_s" in out:
        out["async_copy_block_share"] = out["async_copy_block_s"] / out["ours_save_s"]
    if "async_total_s" in out:
        out["async_total_ratio"] = out["async_total_s"] / out["ours_save_s"]
    if "resident_gb" in out:
        out["async_block_ms_per_resident_gb"] = 1000 * out["async_block_s"] / out["resident_gb"]
    return out | {"runs": runs}


# -- peak memory: one child process per case ----------------------------------------------------


def resident_gb() -> float:
    """This process's resident memory now (``VmRSS``), in GB: a fork's cost grows with it."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024 / 1e9
    return 0.0


def peak_kib() -> int:
    """This process image's peak resident memory: ``VmHWM`` (``ru_maxrss`` of a child starts at
    its parent's size at the fork, which would hide the save's own peak), else ``ru_maxrss``."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def private_kib(pid: int) -> int:
    """Memory only ``pid`` maps (``Private_Clean`` + ``Private_Dirty``); 0 once it is gone."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0
    return sum(
        int(line.split()[1]) for line in text.splitlines() if line.startswith(("Private_Clean:", "Private_Dirty:"))
    )


def memory_child(kind: str, size_mb: float, directory: str) -> None:
    import threading

    model = build(size_mb, 0)
    base = peak_kib()
    child_peak = 0
    if kind == "torch":
        fsync_save(model.state_dict(), Path(directory) / "mem.pt")
    elif kind == "ours":
        save(CheckpointManager(f"file://{directory}/mem", keep_last=1), {"model": model}, 1)
    else:  # background=True, then the caller rewrites every weight at once (copy-on-write's worst case)
        mgr = CheckpointManager(f"file://{directory}/mem", keep_last=1, snapshot=kind)
        future = save(mgr, {"model": model}, 1, background=True)
        assert mgr.last_snapshot is not None and mgr.last_snapshot.mode == kind
        pid, peaks = mgr.last_snapshot.pid, [0]

        def sample() -> None:
            while not future.done():
                peaks[0] = max(peaks[0], private_kib(pid) if pid else 0)
                time.sleep(0.02)

        sampler = threading.Thread(target=sample)
        sampler.start()
        with torch.no_grad():
            for p in model.parameters():
                p.add_(1.0)
        future.result()
        sampler.join()
        child_peak = peaks[0]
        mgr.close()
    print(
        json.dumps(
            {
                "state_kib": nbytes(model) // 1024,
                "before_save_kib": base,
                "parent_peak_kib": peak_kib(),
                "child_peak_private_kib": child_peak,
                "peak_kib": peak_kib() + child_peak,
                "ru_maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
            }
        )
    )


def bench_memory(tmp: str, size_mb: float) -> dict:
    out = {}
    for kind in ("torch", "ours", "fork", "copy"):
        with tempfile.TemporaryDirectory(dir=tmp) as d:
            res = subprocess.run(
                [sys.executable, __file__, "--memory-child", kind, "--size", str(size_mb), "--dir", d],
                capture_output=True,
                text=True,
                check=True,
            )
        out[kind] = json.loads(res.stdout.strip().splitlines()[-1])
    out["peak_ratio"] = out["ours"]["peak_kib"] / out["torch"]["peak_kib"]
    out["fork_peak_ratio"] = out["fork"]["peak_kib"] / out["torch"]["peak_kib"]
    out["copy_peak_ratio"] = out["copy"]["peak_kib"] / out["torch"]["peak_kib"]
    return out


# -- background saves inside a training loop: a process shaped like a training job ----------------


def training_child(size_mb: float, directory: str, repeats: int) -> None:
    """A fresh process that trains (SGD with momentum: the state is the weights plus the momentum,
    ``size_mb`` in all; the process also holds the gradients) and saves as a loop does: each
    round a synchronous save, a step, then ``background=True`` followed by a step that rewrites
    every weight while the child writes (copy-on-write at work). Prints the rounds as JSON."""
    model = build(size_mb / 2, 0)
    opt = torch.optim.SGD(model.parameters(), lr=1e-6, momentum=0.9)
    batch = torch.randn(8, WIDTH)

    def step() -> None:
        opt.zero_grad(set_to_none=False)
        model(batch).square().mean().backward()
        opt.step()

    step()  # gradients and momentum exist from here on, as in a job past its first step
    state = {"model": model, "optimizer": opt}
    mgr = CheckpointManager(f"file://{directory}/train", keep_last=1)
    runs: dict[str, list[float]] = {k: [] for k in ("ours_save_s", "async_block_s", "async_total_s", "resident_gb")}
    runs |= {"fold_wait_s": [], "fold_s": [], "fold_gb": []}
    number = 0
    for _ in range(repeats):
        number += 1
        runs["ours_save_s"].append(timed(lambda: save(mgr, state, number)))
        step()
        number += 1
        runs["resident_gb"].append(resident_gb())
        t0 = time.perf_counter()
        future = save(mgr, state, number, background=True)
        runs["async_block_s"].append(time.perf_counter() - t0)
        assert mgr.last_snapshot is not None and mgr.last_snapshot.mode == "fork", mgr.last_snapshot
        step()  # while the child writes
        future.result()
        runs["async_total_s"].append(time.perf_counter() - t0)
        fold(runs, mgr)
    mgr.close()
    print(json.dumps(runs | {"state_bytes": [encoded_size(state)]}))


def training_rounds(tmp: str, size_mb: float, repeats: int, folding: bool) -> dict[str, list[float]]:
    """One fresh training-shaped process's rounds; ``folding`` False turns the huge-page fold off
    (``SPOTFLEET_HUGEPAGES=0``): the fork snapshot as it is without it, in the same run."""
    env = os.environ | {"SPOTFLEET_HUGEPAGES": "1" if folding else "0"}
    with tempfile.TemporaryDirectory(dir=tmp) as d:
        res = subprocess.run(
            [
                sys.executable,
                __file__,
                "--training-child",
                "--size",
                str(size_mb),
                "--dir",
                d,
                "--repeats",
                str(repeats),
            ],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        )
    return json.loads(res.stdout.strip().splitlines()[-1])


def bench_training(tmp: str, size_mb: float, repeats: int) -> dict:
    """The training-shaped process without the huge-page fold, then with it (the default). The
    first background save of a process forks before any fold, so ``async_block_share_first`` is
    the cold figure and the median the steady one."""
    unfolded = training_rounds(tmp, size_mb, repeats, folding=False)
    runs = training_rounds(tmp, size_mb, repeats, folding=True)
    out: dict = {k: med(v) for k, v in runs.items() if v}
    out["async_block_share"] = out["async_block_s"] / out["ours_save_s"]
    out["async_block_share_rounds"] = [b / s for b, s in zip(runs["async_block_s"], runs["ours_save_s"])]
    out["async_block_share_first"] = out["async_block_share_rounds"][0]
    out["resident_over_state"] = out["resident_gb"] * 1e9 / out["state_bytes"]
    out["async_block_ms_per_resident_gb"] = 1000 * out["async_block_s"] / out["resident_gb"]
    off = {k: med(v) for k, v in unfolded.items() if v}
    out["unfolded"] = {
        "async_block_s": off["async_block_s"],
        "ours_save_s": off["ours_save_s"],
        "async_block_share": off["async_block_s"] / off["ours_save_s"],
        "async_block_share_rounds": [b / s for b, s in zip(unfolded["async_block_s"], unfolded["ours_save_s"])],
        "resident_gb": off["resident_gb"],
        "runs": unfolded,
    }
    out["fold_block_ratio"] = out["async_block_s"] / off["async_block_s"]
    return out | {"runs": runs}


# -- DCP at 4 ranks --------------------------------------------------------------------------------


def dcp_child(rank: int, world: int, port: int, size_mb: float, directory: str, repeats: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    warnings.filterwarnings("ignore")
    model = {f"r{rank}.{k}": v for k, v in build(size_mb / world, rank).state_dict().items()}
    target = {k: torch.zeros_like(v) for k, v in model.items()}
    mgr = CheckpointManager(f"file://{directory}/ours", keep_last=1)
    runs: dict[str, list[float]] = {k: [] for k in ("fs_save_s", "ours_save_s", "fs_load_s", "ours_load_s")}

    def collective(fn) -> float:
        dist.barrier()
        t = timed(fn)
        box = [t]
        slow: list = [None] * world
        dist.all_gather_object(slow, box[0])
        return max(slow)

    for i in range(repeats):
        where = f"{directory}/fs-{i}"
        runs["fs_save_s"].append(collective(lambda: dcp.save(model, storage_writer=dcp.FileSystemWriter(where))))
        runs["ours_save_s"].append(collective(lambda: dcp.save(model, storage_writer=StorageWriter(mgr, i + 1))))
        runs["fs_load_s"].append(collective(lambda: dcp.load(target, storage_reader=dcp.FileSystemReader(where))))
        runs["ours_load_s"].append(collective(lambda: dcp.load(target, storage_reader=StorageReader(mgr))))
        assert all(torch.equal(model[k], target[k]) for k in model)
    if rank == 0:
        print(json.dumps(runs))
    dist.destroy_process_group()


def bench_dcp(tmp: str, size_mb: float, repeats: int, world: int = 4) -> dict:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory(dir=tmp) as d:
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--dcp-child",
                    str(r),
                    "--world",
                    str(world),
                    "--port",
                    str(port),
                    "--size",
                    str(size_mb),
                    "--dir",
                    d,
                    "--repeats",
                    str(repeats),
                ],
                stdout=subprocess.PIPE,
                text=True,
            )
            for r in range(world)
        ]
        outs = [p.communicate()[0] for p in procs]
        if any(p.returncode for p in procs):
            raise RuntimeError(f"a DCP rank failed: {[p.returncode for p in procs]}")
    return summary(json.loads(outs[0].strip().splitlines()[-1]), "fs_save_s", "fs_load_s") | {"ranks": world}


# -- S3 (moto) ----------------------------------------------------------------------------------------


def bench_s3(size_mb: float, repeats: int) -> dict:
    import storage_emulators as emu
    from boto3.s3.transfer import TransferConfig

    from fleet.checkpoint.stores.s3 import S3Store

    model, target = build(size_mb, 0), build(size_mb, 1)
    em = emu.start_moto_process()
    try:
        mgr = CheckpointManager(em.bucket_uri("bench-torch", f"run-{size_mb:g}"), env=em.env, keep_last=1)
        store = mgr.store
        assert isinstance(store, S3Store)
        config: TransferConfig = store.transfer
        copying = CheckpointManager(
            em.bucket_uri("bench-torch", f"copy-{size_mb:g}"), env=em.env, keep_last=1, snapshot="copy"
        )
        runs: dict[str, list[float]] = {
            k: []
            for k in (
                "raw_upload_s",
                "ours_save_s",
                "raw_download_s",
                "ours_load_s",
                "async_block_s",
                "async_total_s",
                "async_copy_block_s",
            )
        }
        step = 0
        for i in range(repeats):
            step += 1
            # the very bytes our save uploads (zeros would read from one cached page, not memory)
            data = walk(to_storable({"model": model})).views().tobytes()
            saves = {
                "ours_save_s": lambda: save(mgr, {"model": model}, step),
                "raw_upload_s": lambda payload=data: store.client.upload_fileobj(
                    io.BytesIO(payload), store.bucket, "raw/object", Config=config
                ),
            }
            for name in alternating(saves, i):
                runs[name].append(timed(saves[name]))
            assert mgr.latest().size == len(data)
            del data, saves
            sink = io.BytesIO()
            loads = {
                "ours_load_s": lambda: load(mgr, {"model": target}),
                "raw_download_s": lambda out=sink: store.client.download_fileobj(
                    store.bucket, "raw/object", out, Config=config
                ),
            }
            for name in alternating(loads, i):
                runs[name].append(timed(loads[name]))
            del sink, loads
            store.client.delete_object(Bucket=store.bucket, Key="raw/object")
            step += 1
            background(runs, mgr, model, step, "fork")
            background(runs, copying, model, step, "copy")
        mgr.close()
        copying.close()
    finally:
        em.stop()
    return summary(runs, "raw_upload_s", "raw_download_s")


def loaded(measure) -> dict:
    """``measure()``'s figures with the machine's 1-minute load average before and after it
    (parts may come from runs of their own, ``--merge``)."""
    before = os.getloadavg()[0]
    out = measure()
    return out | {"load_average_1m": [round(before, 2), round(os.getloadavg()[0], 2)]}


def capacity(size: int, save_s: float) -> dict:
    """Largest state (GB) a save commits inside each notice window, at the measured throughput."""
    return {f"{w}s_notice_gb": round(size / save_s * w / 1e9, 1) for w in WINDOWS}


def main() -> int:
    ap = argparse.ArgumentParser(description="PyTorch / DCP checkpoint benchmark")
    ap.add_argument("--sizes-mb", default="1000,2000")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--parts", default="local,memory,training,dcp,s3")
    ap.add_argument("--merge", action="store_true", help="keep the figures of parts not measured now")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "checkpoint_torch.json"))
    ap.add_argument("--memory-child")
    ap.add_argument("--training-child", action="store_true")
    ap.add_argument("--dcp-child", type=int)
    ap.add_argument("--world", type=int, default=4)
    ap.add_argument("--port", type=int)
    ap.add_argument("--size", type=float)
    ap.add_argument("--dir")
    args = ap.parse_args()
    warnings.filterwarnings("ignore", category=UserWarning)  # DCP: no process group
    if args.memory_child:
        memory_child(args.memory_child, args.size, args.dir)
        return 0
    if args.training_child:
        training_child(args.size, args.dir, args.repeats)
        return 0
    if args.dcp_child is not None:
        dcp_child(args.dcp_child, args.world, args.port, args.size, args.dir, args.repeats)
        return 0
    parts = set(args.parts.split(","))
    out = Path(args.out)
    # one run may measure some parts (--parts) and keep the others' figures from an earlier run
    results: dict[str, dict] = json.loads(out.read_text())["results"] if args.merge and out.exists() else {}
    with tempfile.TemporaryDirectory(prefix="ckpt-torch-bench-", dir=os.environ.get("BENCH_TMP")) as tmp:
        for size_mb in [float(s) for s in args.sizes_mb.split(",")]:
            size = max(1, round(size_mb * MB / (4 * (WIDTH * WIDTH + WIDTH)))) * 4 * (WIDTH * WIDTH + WIDTH)
            r: dict = results.get(f"{size_mb:.0f}MB", {}) | {"bytes": size}
            if "local" in parts:
                r["local"] = loaded(lambda: bench_local(tmp, size_mb, args.repeats))
                r["local"]["capacity"] = capacity(size, r["local"]["ours_save_s"])
                print(f"{size_mb:.0f} MB local: {_row(r['local'])}", flush=True)
            if "memory" in parts:
                r["memory"] = loaded(lambda: bench_memory(tmp, size_mb))
                print(f"{size_mb:.0f} MB memory: {_row(r['memory'])}", flush=True)
            if "training" in parts:
                r["training"] = loaded(lambda: bench_training(tmp, size_mb, args.repeats))
                print(f"{size_mb:.0f} MB training: {_row(r['training'])}", flush=True)
            if "dcp" in parts:
                r["dcp"] = loaded(lambda: bench_dcp(tmp, size_mb, args.repeats))
                print(f"{size_mb:.0f} MB dcp: {_row(r['dcp'])}", flush=True)
            if "s3" in parts:
                r["s3"] = loaded(lambda: bench_s3(size_mb, args.repeats))
                r["s3"]["capacity"] = capacity(size, r["s3"]["ours_save_s"])
                print(f"{size_mb:.0f} MB s3: {_row(r['s3'])}", flush=True)
            results[f"{size_mb:.0f}MB"] = r
            write(out, args.repeats, results)  # after each size: a long run keeps what it measured
    print(f"wrote {out}")
    return 0


def write(out: Path, repeats: int, results: dict) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    machine = {
        "cpus": os.cpu_count(),
        "load_average_1m": os.getloadavg()[0],
        "python": platform.python_version(),
        "platform": platform.platform(),
        # "1": PyTorch puts large CPU tensors in transparent huge pages (a cheaper fork snapshot)
        "THP_MEM_ALLOC_ENABLE": os.environ.get("THP_MEM_ALLOC_ENABLE"),
    }
    out.write_text(
        json.dumps(
            {
                "benchmark": "checkpoint_torch",
                "repeats": repeats,
                "torch": torch.__version__,
                "machine": machine,
                "results": results,
                "notes": "medians of interleaved rounds (each pair runs in the other order every other round); "
                "resident_gb is the process's VmRSS before each fork snapshot; moto runs in a child process on the same "
                "machine; capacity = measured save throughput x notice window; "
                "CPU tensors only (CUDA state not measured: no GPU); async_block_share is the fork "
                "snapshot's blocking time over the same rounds' synchronous save, "
                "async_copy_block_share the copy snapshot's; each fork snapshot is followed by the huge-page fold, "
                "left to finish (fold_wait_s) before the next timed save; training.unfolded: the same training "
                "process with the fold off (SPOTFLEET_HUGEPAGES=0)",
            },
            indent=2,
        )
        + "\n"
    )


def _row(r: dict) -> str:
    return "  ".join(f"{k} {v:.3f}" for k, v in r.items() if isinstance(v, float))


if __name__ == "__main__":
    sys.exit(main())
