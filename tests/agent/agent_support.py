"""Helpers for the agent tests: the example training job and ``fleet`` as real subprocesses."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "train_resumable.py"
FLEET = [sys.executable, "-m", "fleet.cli.main"]


def job_argv(uri: str, *, steps: int = 100_000, save_every: int = 10, step_time: float = 0.01) -> list[str]:
    """The checkpoint engineer's example job (numpy backend: fast to start, no torch needed)."""
    return [
        sys.executable,
        str(EXAMPLE),
        "--uri",
        uri,
        "--steps",
        str(steps),
        "--save-every",
        str(save_every),
        "--step-time",
        str(step_time),
        "--backend",
        "numpy",
    ]


def env(home: Path, **extra: str) -> dict[str, str]:
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SPOTFLEET_", "AWS_EC2_METADATA", "GCE_METADATA")) and k != "CONTAINER_ID"
    }
    return {**base, "SPOTFLEET_HOME": str(home), "PYTHONUNBUFFERED": "1", **extra}


STARTED: list[subprocess.Popen[bytes]] = []


def start(argv: list[str], log: Path, environ: dict[str, str]) -> subprocess.Popen[bytes]:
    """Start a subprocess (its own process group) logging to ``log``; the conftest kills the
    group, children included, when a test leaves it running."""
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, env=environ, cwd=ROOT, start_new_session=True
        )
    STARTED.append(proc)
    return proc


def process_tree(pid: int) -> list[int]:
    """``pid`` and every live descendant (from /proc), parents first: children that started a
    session of their own (torchrun's workers) included."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    tree, todo = [], [pid]
    while todo:
        tree.append(todo.pop(0))
        todo += children.get(tree[-1], [])
    return tree


def kill_tree(pid: int) -> None:
    """SIGKILL ``pid``'s process group and every descendant, as a machine that vanishes would."""
    tree = process_tree(pid)
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for each in tree:
        try:
            os.kill(each, signal.SIGKILL)
        except ProcessLookupError:
            pass


def kill_leftovers() -> None:
    while STARTED:
        proc = STARTED.pop()
        kill_tree(proc.pid)
        proc.wait()


def wait_until(condition: Callable[[], Any], timeout: float = 30.0, what: str = "condition") -> Any:
    end = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.05)


def last_step(log: Path) -> int:
    """The last ``step N`` the job printed (0 before the first)."""
    steps = [int(line.split()[1]) for line in log.read_text().splitlines() if line.startswith("step ")]
    return steps[-1] if steps else 0


def trailing_json(log: Path) -> dict[str, Any]:
    """The ``--json`` document a command printed last (after the job's own output)."""
    text = log.read_text()
    return json.loads(text[text.rindex("\n{\n") + 1 if "\n{\n" in text else text.index("{") :])


def finish(proc: subprocess.Popen[bytes], timeout: float = 30.0) -> int:
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise
