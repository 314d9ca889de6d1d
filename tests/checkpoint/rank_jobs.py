"""Start the ranks of tests/checkpoint/torch_ranks.py as real processes and collect what they report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import storage_emulators as emu

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


@dataclass
class RankResult:
    rank: int
    returncode: int
    report: dict | None  # the rank's JSON line; None when it died or failed
    stderr: str


def run_ranks(scenario: str, uri: str, env: dict[str, str], world: int = 2, timeout: float = 150) -> list[RankResult]:
    """Run ``scenario`` on ``world`` gloo ranks against ``uri``; waits for all of them."""
    port = str(emu.free_port())
    full_env = {**os.environ, **env, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    procs = [
        subprocess.Popen(
            [sys.executable, str(HERE / "torch_ranks.py"), scenario, str(r), str(world), port, uri],
            env=full_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in range(world)
    ]
    results = []
    for rank, proc in enumerate(procs):
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            raise
        lines = [line for line in out.splitlines() if line.startswith("{")]
        results.append(RankResult(rank, proc.returncode, json.loads(lines[-1]) if lines else None, err))
    return results


def reports(results: list[RankResult]) -> list[dict]:
    """Every rank's report; fails with the ranks' stderr when one did not finish cleanly."""
    bad = [r for r in results if r.returncode != 0 or r.report is None]
    assert not bad, "\n".join(f"rank {r.rank} exited {r.returncode}:\n{r.stderr[-3000:]}" for r in bad)
    return [r.report for r in results]  # type: ignore[misc]
