#!/usr/bin/env python3
"""Notice-to-hook latency of the node agent, per cloud, against the fake metadata services.

Latency = the moment the fake makes the notice visible -> the moment the hook's signal reaches
the target process (this benchmark, via a SIGUSR1 handler). Each trial starts a fresh watcher at
its default settings (AWS/Azure/Vast poll every 1 s, the local notice file every
0.1 s, GCE long-polls ``wait_for_change``), lets it poll once, waits a random fraction of a poll
interval (notices land anywhere in the poll cycle) and publishes the notice. The same
``respond()`` as ``fleet agent`` fires the hook.

Anchor: aws-node-termination-handler polls IMDS every 2 s (about 1 s median, 2 s worst case);
the aim is at most 1 s, and near zero where GCE's wait_for_change pushes the change.

    python benchmarks/agent_latency.py [--trials 20] [--clouds aws,gcp,azure,vast,local]

Prints a table and writes benchmarks/results/agent_latency.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from fakes.metadata import FakeAzure, FakeGce, FakeImds, FakeServer, FakeVast  # noqa: E402

from fleet.agent.aws import AwsWatcher  # noqa: E402
from fleet.agent.azure import AzureWatcher  # noqa: E402
from fleet.agent.gcp import GceWatcher  # noqa: E402
from fleet.agent.hooks import SignalHook  # noqa: E402
from fleet.agent.local import LocalWatcher  # noqa: E402
from fleet.agent.notice import PollingWatcher  # noqa: E402
from fleet.agent.runner import respond  # noqa: E402
from fleet.agent.vast import VastWatcher  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "agent_latency.json"
ANCHOR_S = {"aws-node-termination-handler poll interval": 2.0, "aim_p95": 1.0}
RECEIVED: list[float] = []


class Source:
    """One notice source: how to make its watcher, publish a notice and know when it was published."""

    def __init__(
        self,
        cloud: str,
        make: Callable[[], PollingWatcher],
        publish: Callable[[], float],
        warm: Callable[[], bool],
        reset: Callable[[], None] = lambda: None,
    ):
        self.cloud, self.make, self.publish, self.warm, self.reset = cloud, make, publish, warm, reset


def sources(tmp: Path, vast_intervals: tuple[float, ...] = ()) -> tuple[list[Source], list[FakeServer]]:
    """Every notice source; ``vast_intervals`` adds a Vast source per poll interval (``vast@1s``)."""
    imds, gce, azure, vast = FakeImds().start(), FakeGce().start(), FakeAzure().start(), FakeVast().start()
    notice_file = tmp / "notice.json"

    def published(fake: FakeServer, action: Callable[[], object]) -> Callable[[], float]:
        def go() -> float:
            action()
            assert fake.published_at is not None
            return fake.published_at

        return go

    def write_notice() -> float:
        tmp_file = notice_file.with_suffix(".tmp")
        tmp_file.write_text(json.dumps({"action": "terminate", "time": time.time() + 120}))
        at = time.time()
        tmp_file.rename(notice_file)
        return at

    def reset_vast() -> None:
        vast.reset()
        vast.add_instance("1")

    return [
        Source(
            "aws",
            lambda: AwsWatcher(imds.url),
            published(imds, imds.schedule_action),
            lambda: bool(imds.seen("GET", "spot/instance-action")),
            imds.reset,
        ),
        Source(
            "gcp",
            lambda: GceWatcher(gce.url),
            published(gce, gce.preempt),
            lambda: any(r.query.get("wait_for_change") for r in gce.requests),
            gce.reset,
        ),
        Source(
            "azure",
            lambda: AzureWatcher(azure.url),
            published(azure, azure.schedule),
            lambda: bool(azure.seen("GET", "/metadata/scheduledevents")),
            azure.reset,
        ),
        Source(
            "vast",
            lambda: VastWatcher("1", api_key=vast.api_key, url=vast.url),
            published(vast, lambda: vast.outbid("1")),
            lambda: bool(vast.requests),
            reset_vast,
        ),
        Source(
            "local",
            lambda: LocalWatcher(notice_file),
            write_notice,
            lambda: True,
            lambda: notice_file.unlink(missing_ok=True),
        ),
    ] + [
        Source(
            f"vast@{every:g}s",
            lambda every=every: VastWatcher("1", api_key=vast.api_key, url=vast.url, interval=every),
            published(vast, lambda: vast.outbid("1")),
            lambda: bool(vast.requests),
            reset_vast,
        )
        for every in vast_intervals
    ], [imds, gce, azure, vast]


def trial(src: Source, rng: random.Random) -> float:
    """One notice: seconds from publication to the hook's signal arriving here."""
    src.reset()
    RECEIVED.clear()
    watcher = src.make()
    stop = threading.Event()
    hook = SignalHook(signal.SIGUSR1, os.getpid())

    def agent() -> None:
        notice = watcher.wait_for_notice(stop)
        if notice is not None:
            respond(notice, hook)

    thread = threading.Thread(target=agent, daemon=True)
    thread.start()
    end = time.monotonic() + 10
    while not src.warm():
        assert time.monotonic() < end, f"{src.cloud}: the watcher never polled"
        time.sleep(0.005)
    time.sleep(rng.uniform(0, max(watcher.interval, 0.05)))
    published_at = src.publish()
    end = time.monotonic() + 15
    while not RECEIVED:
        assert time.monotonic() < end, f"{src.cloud}: no hook within 15 s"
        time.sleep(0.001)
    stop.set()
    thread.join(timeout=5)
    return RECEIVED[0] - published_at


def summarise(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    return {
        "median_s": statistics.median(ordered),
        "p95_s": p95,
        "min_s": ordered[0],
        "max_s": ordered[-1],
        "mean_s": statistics.fmean(ordered),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--clouds", default="aws,gcp,azure,vast,local")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--vast-intervals", default="", help="also measure Vast at these poll intervals, e.g. 1,2 (reported as vast@1s)"
    )
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    signal.signal(signal.SIGUSR1, lambda *_: RECEIVED.append(time.time()))
    rng = random.Random(args.seed)
    wanted = args.clouds.split(",")
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        every = tuple(float(v) for v in args.vast_intervals.split(",") if v)
        srcs, fakes = sources(Path(tmp), every)
        wanted += [f"vast@{v:g}s" for v in every]
        try:
            for src in (s for s in srcs if s.cloud in wanted):
                interval = src.make().interval
                values = [trial(src, rng) for _ in range(args.trials)]
                results[src.cloud] = {
                    "poll_interval_s": interval or "long-poll",
                    "trials": len(values),
                    **summarise(values),
                    "samples_s": [round(v, 6) for v in values],
                }
                row = results[src.cloud]
                print(
                    f"{src.cloud:8} interval {str(row['poll_interval_s']):9} median {row['median_s'] * 1000:7.1f} ms"
                    f"   p95 {row['p95_s'] * 1000:7.1f} ms   max {row['max_s'] * 1000:7.1f} ms",
                    flush=True,
                )
        finally:
            for fake in fakes:
                fake.stop()
    doc = {
        "benchmark": "notice-to-hook latency",
        "definition": "fake publishes notice -> hook signal received",
        "anchor": ANCHOR_S,
        "seed": args.seed,
        "machine": {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count()},
        "results": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"saved {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
