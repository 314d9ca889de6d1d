#!/usr/bin/env python3
"""Checkpoint throughput and async blocking time, per store, against the local emulators.

For each store (local directory, moto S3, fake-gcs-server, Azurite) and a state of ``--size-mb``
(default 256 MB of incompressible float32 arrays):

- raw:   the serialised bytes uploaded with the vendor SDK's own large-object transfer to the same
         endpoint (S3 managed multipart, GCS chunked resumable upload, Azure parallel block upload;
         local: write + fsync), no checkpoint protocol;
- save:  ``CheckpointManager.save`` (serialise, upload, SHA-256, verify, commit, prune);
- async: time ``save_async`` blocks the caller (the snapshot), and its total time to commit.

Throughput ratio = raw time / save time (aim >= 0.80), from the best of ``--repeats`` runs each
(the emulators share this machine's cores, so single runs vary a lot; the ratio of medians is
saved too); blocking ratio = median async blocking time / median save time (aim <= 0.05).
Resume time (``--resume-repeats``, default 5; 0 skips it): from starting the example job
(examples/train_resumable.py) on a location that holds a checkpoint to its first resumed step
printed, directly and under ``fleet run`` on a local directory, and directly on S3 (moto in a
child process). Medians; a restart after a crash adds ``fleet run``'s backoff (1 s by default).

Prints a table and writes benchmarks/results/checkpoint.json.

    python benchmarks/checkpoint.py [--size-mb 256] [--repeats 5] [--stores file,s3,gs,az]
                                    [--resume-repeats 5]
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
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "fakes"))

import storage_emulators as emu  # noqa: E402

from fleet.checkpoint import CheckpointManager, TransferSettings, open_store  # noqa: E402
from fleet.checkpoint.codec import encode  # noqa: E402
from fleet.checkpoint.payload import Payload  # noqa: E402

TRANSFER = TransferSettings()  # the library defaults, used by both sides of the comparison
MB = 1_000_000


def make_state(size_mb: int) -> dict:
    """A training-like state: weights and two optimizer moments, float32, incompressible."""
    rng = np.random.default_rng(0)
    n = size_mb * MB // 4 // 4
    return {
        "model": {"w": rng.standard_normal(2 * n, dtype=np.float32)},
        "optimizer": {"m": rng.standard_normal(n, dtype=np.float32), "v": rng.standard_normal(n, dtype=np.float32)},
        "step": 0,
    }


def raw_uploader(kind: str, uri: str, env: dict[str, str]) -> Callable[[Payload, str], None]:
    """The vendor SDK's plain large-object upload to the same endpoint (no checkpoint protocol)."""
    store = open_store(uri, env=env, transfer=TRANSFER)
    if kind == "file":

        def put(payload: Payload, name: str) -> None:
            path = Path(store.root) / name  # type: ignore[attr-defined]
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "wb", buffering=0) as f:
                for chunk in payload.chunks:
                    f.write(chunk)
                os.fsync(f.fileno())
    elif kind == "s3":
        from boto3.s3.transfer import TransferConfig

        cfg = TransferConfig(
            multipart_threshold=TRANSFER.part_size,
            multipart_chunksize=TRANSFER.part_size,
            max_concurrency=TRANSFER.concurrency,
        )

        def put(payload: Payload, name: str) -> None:
            store.client.upload_fileobj(
                payload.reader(),
                store.bucket,
                f"{store.prefix}/{name}",  # type: ignore[attr-defined]
                Config=cfg,
            )
    elif kind == "gs":

        def put(payload: Payload, name: str) -> None:
            blob = store.bucket.blob(f"{store.prefix}/{name}", chunk_size=TRANSFER.part_size)  # type: ignore[attr-defined]
            blob.upload_from_file(payload.reader(), size=payload.size, rewind=False, checksum=None)
    else:

        def put(payload: Payload, name: str) -> None:
            store.container.upload_blob(
                f"{store.prefix}/{name}",
                payload.reader(),  # type: ignore[attr-defined]
                length=payload.size,
                overwrite=True,
                max_concurrency=TRANSFER.concurrency,
            )

    return put


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def bench_store(kind: str, uri: str, env: dict[str, str], state: dict, repeats: int) -> dict:
    payload = encode(state)
    size = payload.size
    put = raw_uploader(kind, uri, env)
    store = open_store(uri, env=env, transfer=TRANSFER)
    raw, save, block, async_total, load = [], [], [], [], []
    mgr = CheckpointManager(uri, env=env, keep_last=1, transfer=TRANSFER)
    step = 0
    for i in range(repeats):
        raw.append(timed(lambda: put(payload, f"raw/{i}")))
        store.delete(f"raw/{i}")
        step += 1
        save.append(timed(lambda: mgr.save(state, step)))
        step += 1
        t0 = time.perf_counter()
        future = mgr.save_async(state, step)
        block.append(time.perf_counter() - t0)
        future.result()
        async_total.append(time.perf_counter() - t0)
        load.append(timed(mgr.load_latest))
    mgr.close()
    med = statistics.median
    return {
        "bytes": size,
        "raw_s": min(raw),
        "save_s": min(save),
        "raw_MBps": size / MB / min(raw),
        "save_MBps": size / MB / min(save),
        "throughput_ratio": min(raw) / min(save),
        "throughput_ratio_median": med(raw) / med(save),
        "async_block_s": med(block),
        "async_total_s": med(async_total),
        "load_s": med(load),
        "blocking_ratio": med(block) / med(save),
        "runs": {"raw_s": raw, "save_s": save, "async_block_s": block, "async_total_s": async_total, "load_s": load},
    }


EXAMPLE = ROOT / "examples" / "train_resumable.py"


def time_to_first_step(argv: list[str], env: dict[str, str], step: int) -> float:
    """Seconds from starting ``argv`` until it prints ``step <step> ...`` (the process then finishes)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    assert proc.stdout is not None
    elapsed = None
    for line in proc.stdout:
        if elapsed is None and line.startswith(f"step {step} "):
            elapsed = time.perf_counter() - t0
    if proc.wait(timeout=120) != 0 or elapsed is None:
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode} without printing step {step}")
    return elapsed


def bench_resume(uri: str, env: dict[str, str], repeats: int, wrapper: bool) -> dict:
    """Median time from start to the first resumed step of the example job on ``uri``."""
    full_env = {**os.environ, **env, "PYTHONPATH": str(ROOT)}
    job = [sys.executable, str(EXAMPLE), "--uri", uri, "--backend", "numpy", "--save-every", "1000"]
    subprocess.run([*job, "--steps", "20"], check=True, stdout=subprocess.DEVNULL, env=full_env)
    times = []
    with tempfile.TemporaryDirectory(prefix="ckpt-bench-home-") as home:
        for i in range(repeats):
            steps = 20 + i + 1  # each run resumes at the previous run's final checkpoint
            argv = [*job, "--steps", str(steps)]
            if wrapper:
                argv = [
                    sys.executable,
                    "-m",
                    "fleet.cli.main",
                    "--home",
                    home,
                    "run",
                    "--cloud",
                    "none",
                    "--checkpoint-uri",
                    uri,
                    "--",
                    *argv,
                ]
            times.append(time_to_first_step(argv, full_env, steps))
    return {"median_s": statistics.median(times), "runs_s": times}


def resume_section(repeats: int) -> dict:
    results = {}
    with tempfile.TemporaryDirectory(prefix="ckpt-bench-") as tmp:
        results["direct_local"] = bench_resume(f"file://{tmp}/direct", {}, repeats, wrapper=False)
        results["fleet_run_local"] = bench_resume(f"file://{tmp}/wrapped", {}, repeats, wrapper=True)
    em = emu.start_moto_process()
    try:
        results["direct_s3_moto"] = bench_resume(em.bucket_uri("bench-resume", "run"), em.env, repeats, wrapper=False)
    finally:
        em.stop()
    for name, r in results.items():
        print(f"resume {name:<16} {r['median_s']:.2f} s to the first resumed step (median of {repeats})", flush=True)
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description="checkpoint throughput and async blocking benchmark")
    ap.add_argument("--size-mb", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--stores", default="file,s3,gs,az")
    ap.add_argument("--resume-repeats", type=int, default=5)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "checkpoint.json"))
    args = ap.parse_args()
    state = make_state(args.size_mb)
    starters = {"s3": emu.start_moto_process, "gs": emu.start_fake_gcs, "az": emu.start_azurite}
    results: dict[str, dict] = {}
    for kind in filter(None, args.stores.split(",")):
        with tempfile.TemporaryDirectory(prefix="ckpt-bench-", dir=os.environ.get("BENCH_TMP")) as tmp:
            em = None
            if kind == "file":
                uri, env, name = f"file://{tmp}/store", {}, "local dir"
            else:
                em = starters[kind]()
                uri, env, name = em.bucket_uri("bench-ckpt", "run"), em.env, em.name
            try:
                results[kind] = {"store": name, **bench_store(kind, uri, env, state, args.repeats)}
            finally:
                if em is not None:
                    em.stop()
        r = results[kind]
        print(
            f"{r['store']:<16} raw {r['raw_MBps']:7.1f} MB/s  save {r['save_MBps']:7.1f} MB/s  "
            f"ratio {r['throughput_ratio']:.2f} (median {r['throughput_ratio_median']:.2f})  async blocks {r['async_block_s'] * 1000:6.1f} ms "
            f"= {r['blocking_ratio'] * 100:4.1f}% of save  load {r['load_s']:.2f} s",
            flush=True,
        )
    doc = {
        "benchmark": "checkpoint",
        "size_mb": args.size_mb,
        "repeats": args.repeats,
        "transfer": {"part_size": TRANSFER.part_size, "concurrency": TRANSFER.concurrency},
        "targets": {"throughput_ratio_min": 0.80, "blocking_ratio_max": 0.05},
        "notes": "emulators run on the client's machine and compete with it for CPU; throughput ratios "
        "use the best of the repeats (ratio of medians alongside), blocking ratios use medians",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "stores": results,
        "resume": resume_section(args.resume_repeats) if args.resume_repeats > 0 else {},
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
