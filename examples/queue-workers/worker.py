#!/usr/bin/env python3
"""A queue worker (standard library only): pulls tasks from the head, checkpoints partial
progress there, and gives its task back when an interruption notice comes.

The head is ``http://$SPOTFLEET_HEAD_ADDR:$SPOTFLEET_HEAD_PORT`` (set by spotfleet on every
worker). A notice is either SIGTERM (what a preempted node gets) or the file named by
``$SPOTFLEET_NOTICE_FILE`` appearing (the local cloud and ``fleet run`` write it); on either,
the worker sends its progress with ``/requeue`` and exits 0, so the next worker resumes there.

A task's work is ``units`` steps; step ``i`` adds ``i * i`` to a running sum (the partial
state that is checkpointed), so the result shows whether any step was lost or done twice.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import time
import urllib.error
import urllib.request

NOTICE = {"got": False}


def on_term(_sig: int, _frame: object) -> None:
    NOTICE["got"] = True


def noticed() -> bool:
    path = os.environ.get("SPOTFLEET_NOTICE_FILE", "")
    return NOTICE["got"] or bool(path and os.path.exists(path))


def call(base: str, path: str, body: dict | None = None) -> dict:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return json.loads(err.read() or b"{}") | {"http_status": err.code}


def work(base: str, me: str, task: dict, step_seconds: float, checkpoint_every: int) -> str:
    """Run one task from its checkpoint; ``done``, ``requeued`` or ``lost`` (the lease went to another)."""
    name, lease, units = task["task"], task["lease"], task["units"]
    step, total = task["progress"], (task.get("state") or {}).get("sum", 0)
    while step < units:
        if noticed():
            call(base, "/requeue", {"task": name, "lease": lease, "progress": step, "state": {"sum": total}})
            print(f"{me}: notice: task {name} requeued at step {step}", flush=True)
            return "requeued"
        time.sleep(step_seconds)
        total += step * step
        step += 1
        if step % checkpoint_every == 0 and step < units:
            if not call(
                base, "/progress", {"task": name, "lease": lease, "progress": step, "state": {"sum": total}}
            ).get("ok"):
                return "lost"
    ok = call(base, "/done", {"task": name, "lease": lease, "result": total}).get("ok")
    print(f"{me}: task {name} {'done' if ok else 'refused (lease lost)'}: {total}", flush=True)
    return "done" if ok else "lost"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--step-seconds", type=float, default=0.05)
    ap.add_argument("--checkpoint-every", type=int, default=5, help="steps between progress checkpoints")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, on_term)
    base = f"http://{os.environ['SPOTFLEET_HEAD_ADDR']}:{os.environ.get('SPOTFLEET_HEAD_PORT', '8700')}"
    me = os.environ.get("SPOTFLEET_INSTANCE_ID") or socket.gethostname()
    while not noticed():
        try:
            task = call(base, "/lease", {"worker": me})
        except OSError:  # the head is not (or no longer) reachable: wait for it
            time.sleep(1)
            continue
        if task.get("finished"):
            print(f"{me}: every task is done", flush=True)
            break
        if task.get("wait"):
            time.sleep(0.2)
            continue
        if work(base, me, task, args.step_seconds, args.checkpoint_every) == "requeued":
            break


if __name__ == "__main__":
    main()
