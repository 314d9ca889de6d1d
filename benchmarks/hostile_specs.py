#!/usr/bin/env python3
"""Cost of hostile spec input: seconds, peak memory and error length per case.

Each case is loaded by ``load_spec`` in a fresh Python process (so peak RSS is the case's
own) and checked through ``fleet spec check`` for the exit status. Anchor: before the
hardening a 616-byte alias bomb ran 90 s and took 7.5 GB, a 409-byte one printed a 312 MB
error, a FIFO hung forever and ``/dev/zero`` grew without limit; the aim is exit 2, one
short line, within a second or two, in the memory of a plain run.

    python benchmarks/hostile_specs.py

Prints a table and writes benchmarks/results/hostile_specs.json.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "hostile_specs.json"
FLEET = str(Path(sys.executable).with_name("fleet"))

MINIMAL = "name: quickstart\nbackend: local\ncapacity:\n  gpus: 8\n  accelerators: [H100]\n"
BOMB = (
    "".join(
        [f"l0: &l0 [{', '.join(['lol'] * 9)}]\n"]
        + [f"l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * 9)}]\n" for n in range(1, 9)]
    )
    + MINIMAL
    + "node:\n  env: *l8\n"
)

CASES: dict[str, bytes | str] = {
    "valid minimal spec": MINIMAL,
    f"alias bomb ({len(BOMB)} bytes, 9^9 values)": BOMB,
    "100k-deep [[[...]]]": MINIMAL + "node:\n  env: " + "[" * 100_000 + "]" * 100_000 + "\n",
    "non-UTF-8 bytes": MINIMAL.encode() + b"node: {image: \xff}\n",
    "duplicate keys": MINIMAL + "name: other\n",
    "5000-digit integer": MINIMAL.replace("gpus: 8", "gpus: " + "9" * 5000),
    "1000 bad list items": MINIMAL + "providers:\n  aws:\n    regions: [" + ", ".join(["[1]"] * 1000) + "]\n",
    "FIFO": "fifo",
    "/dev/zero": "/dev/zero",
}

PROBE = """
import json, resource, sys, time
from fleet.errors import SpecError
from fleet.spec import load_spec
t = time.perf_counter()
try:
    load_spec(sys.argv[1]); outcome, text = "valid", ""
except SpecError as err:
    outcome, text = "SpecError", str(err)
print(json.dumps({"outcome": outcome, "seconds": time.perf_counter() - t, "error_chars": len(text),
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def run_case(name: str, body: bytes | str, folder: Path) -> dict[str, object]:
    if body == "/dev/zero":
        path = Path("/dev/zero")
    elif body == "fifo":
        path = folder / "spec.fifo"
        if not path.exists():
            os.mkfifo(path)
    else:
        path = folder / "case.yaml"
        path.write_bytes(body.encode() if isinstance(body, str) else body)
    probe = subprocess.run([sys.executable, "-c", PROBE, str(path)], capture_output=True, text=True, timeout=120)
    row = json.loads(probe.stdout)
    t = time.perf_counter()
    cli = subprocess.run(
        [FLEET, "spec", "check", str(path)], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )
    row.update(
        case=name,
        cli_exit=cli.returncode,
        cli_seconds=round(time.perf_counter() - t, 3),
        stderr_lines=len(cli.stderr.splitlines()),
        seconds=round(row["seconds"], 4),
        peak_rss_mb=round(row["peak_rss_mb"], 1),
    )
    return row


def main() -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, body in CASES.items():
            row = run_case(name, body, Path(tmp))
            rows.append(row)
            print(
                f"{name:>36}: {row['outcome']:>9} in {row['seconds']:.3f} s, peak {row['peak_rss_mb']:.0f} MB, "
                f"error {row['error_chars']} chars; CLI exit {row['cli_exit']} in {row['cli_seconds']:.2f} s, "
                f"{row['stderr_lines']} stderr line(s)",
                flush=True,
            )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "machine": {
                    "cpus": os.cpu_count(),
                    "python": platform.python_version(),
                    "platform": platform.platform(),
                },
                "target": "every hostile case: exit 2, one short line, within a second or two, memory of a plain run",
                "cases": rows,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"saved {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
