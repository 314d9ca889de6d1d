"""examples/queue-workers end to end on the local cloud with real node processes: the head
serves the queue, workers pull tasks, preempted workers give their task back at its last step,
and every task is completed exactly once with the right result."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DRIVER = ROOT / "examples" / "queue-workers" / "run_local.py"

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")


def test_every_task_finishes_exactly_once_through_preemptions(tmp_path):
    env = {"SPOTFLEET_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin", "PYTHONUNBUFFERED": "1"}
    out = subprocess.run(
        [sys.executable, str(DRIVER), "--tasks", "10", "--units", "20", "--preempt", "2", "--timeout", "240"],
        capture_output=True,
        text=True,
        timeout=400,
        env=env,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["finished"] and report["exactly_once"] and report["results_correct"], report
    assert report["preemptions"] >= 1  # workers were really taken back mid-run
    # each lost worker's task came back: by its notice (requeue at its step) or by lease expiry
    assert report["requeues"] + report["expired_leases"] >= report["preemptions"]
    assert isinstance(report["refused_completions"], int) and report["tasks_per_hour"] > 0
