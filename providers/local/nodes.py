"""Real local processes for simulated instances (clouds opened with ``run_nodes=True``).

Each instance launched with a non-empty ``NodeConfig.startup`` gets a supervisor process
(``python -m providers.local.nodes ROOT INSTANCE_ID``, its own session) that runs the
startup command through ``/bin/sh`` in ``<root>/nodes/<id>/`` (output in ``node.log``) with
``SPOTFLEET_INSTANCE_ID``, ``SPOTFLEET_FLEET``, ``SPOTFLEET_NOTICE_FILE`` and
``SPOTFLEET_CHECKPOINT_URI`` (the fleet's bucket, :func:`checkpoint_uri`) and
``SPOTFLEET_NODE_LOG`` (that ``node.log``, which ``fleet run`` copies to the bucket as on a
cloud node) set, on top of ``NodeConfig.env``.

The supervisor keeps the simulated cloud ticking while its node lives (so notices are
written on time even when no CLI runs), sends SIGTERM to the node when the instance is
preempted (the notice came a window earlier) and SIGKILL after a grace period; terminate
kills the whole session at once. ``exit.json`` records how the node ended.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from fleet.model import InstanceState, NodeConfig
from fleet.private import private_dir, write_private

if TYPE_CHECKING:
    import sqlite3

    from providers.local.cloud import LocalCloud

POLL_SECONDS = 0.2
GRACE_SECONDS = 5.0


def node_dir(root: Path, instance_id: str) -> Path:
    return root / "nodes" / instance_id


def checkpoint_uri(cloud: LocalCloud, fleet: str) -> str:
    """The bucket the local cloud gives ``fleet``'s nodes (checkpoints, node logs)."""
    return (cloud.buckets / f"{fleet}-checkpoints").as_uri()


def console(root: Path, instance_id: str, limit: int = 1024 * 1024) -> str:
    """The end of a node's raw output (its "console"), "" before it wrote any."""
    try:
        with open(node_dir(root, instance_id) / "node.log", "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - limit))
            return f.read().decode("utf-8", errors="backslashreplace")
    except FileNotFoundError:
        return ""


def start(cloud: LocalCloud, rows: Sequence[sqlite3.Row], node: NodeConfig) -> None:
    """Start a supervisor per instance in ``rows`` and record its pid."""
    for row in rows:
        where = private_dir(node_dir(cloud.root, row["id"]))
        env = {
            "SPOTFLEET_INSTANCE_ID": row["id"],
            "SPOTFLEET_FLEET": row["fleet"] or "",
            "SPOTFLEET_NOTICE_FILE": str(cloud.notices / f"{row['id']}.json"),
            "SPOTFLEET_CHECKPOINT_URI": checkpoint_uri(cloud, row["fleet"] or ""),
            "SPOTFLEET_NODE_LOG": str(where / "node.log"),
            **node.env,
        }
        write_private(where / "node.json", json.dumps({"startup": node.startup, "env": env}))  # may hold secrets
        proc = subprocess.Popen(
            [sys.executable, "-m", "providers.local.nodes", str(cloud.root), row["id"]],
            cwd=where,
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=open(where / "supervisor.log", "ab"),
        )
        with cloud.db.write() as conn:
            conn.execute("UPDATE instances SET pid=? WHERE id=?", (proc.pid, row["id"]))


def running(pid: int | None, instance_id: str) -> bool:
    """Whether ``pid`` is the live supervisor of ``instance_id`` (a reused pid is not)."""
    if not pid:
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return instance_id.encode() in cmdline and state not in ("Z", "X")


def kill(row: sqlite3.Row) -> None:
    """SIGKILL the supervisor's session (the node with it), if it still runs."""
    if running(row["pid"], row["id"]):
        try:
            os.killpg(row["pid"], signal.SIGKILL)
        except ProcessLookupError:
            pass


def supervise(cloud: LocalCloud, instance_id: str) -> dict[str, object]:
    """Run the node until its instance ends; returns what ``exit.json`` records."""
    where = node_dir(cloud.root, instance_id)
    config = json.loads((where / "node.json").read_text())
    state = cloud.instance_state(instance_id)
    if state is None or not state.alive:
        return {"reason": f"{state.value if state else 'gone'} before start"}
    signal.signal(signal.SIGTERM, lambda *_: None)  # the node's SIGTERM is meant for the node
    with open(where / "node.log", "ab") as log:
        child = subprocess.Popen(
            ["/bin/sh", "-c", config["startup"]],
            cwd=where,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **config["env"]},
        )
    while state is not None and state.alive:
        time.sleep(POLL_SECONDS)
        state = cloud.instance_state(instance_id)
    if state is not InstanceState.PREEMPTED:  # terminated (or vanished): no grace
        child.kill()
        return {"reason": state.value if state else "gone", "returncode": child.wait()}
    os.killpg(os.getpgid(0), signal.SIGTERM)  # preempted: the node's hard-off
    try:
        code = child.wait(GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        child.kill()
        code = child.wait()
    return {"reason": "preempted", "returncode": code}


def main(argv: list[str]) -> None:
    from providers.local.cloud import LocalCloud

    root, instance_id = Path(argv[0]), argv[1]
    cloud = LocalCloud.open(root)
    outcome = supervise(cloud, instance_id)
    (node_dir(root, instance_id) / "exit.json").write_text(json.dumps(outcome))
    os.killpg(os.getpgid(0), signal.SIGKILL)  # leave no grandchild behind


if __name__ == "__main__":
    main(sys.argv[1:])
