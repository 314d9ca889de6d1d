#!/usr/bin/env python3
"""A small task queue served over HTTP (standard library only): the head of the queue-workers example.

Run it on the head node (``head.startup``); workers reach it at
``http://$SPOTFLEET_HEAD_ADDR:$SPOTFLEET_HEAD_PORT``. Every request and reply is JSON.

* ``POST /lease {"worker": W}`` -> ``{"task": T, "lease": L, "progress": P}``: the next pending task,
  with the progress a previous worker checkpointed; ``{"wait": true}`` while every pending task
  is leased; ``{"finished": true}`` once every task is done.
* ``POST /progress {"task", "lease", "progress", "state"}``: checkpoint partial progress (and the
  worker's partial state) so a successor resumes there; renews the lease.
* ``POST /requeue {"task", "lease", "progress", "state"}``: give the task back (an interruption
  notice came); it is pending again from that checkpoint.
* ``POST /done {"task", "lease", "result"}``: complete the task. Only the current lease holder
  may complete it, so a task is completed exactly once even when a lease expired and another
  worker took the task over (the late completion is refused with 409 and counted).
* ``GET /status``: per-task state, completions, requeues, expired leases, redone units.

A lease not renewed for ``--lease-seconds`` expires (a worker lost without notice) and the task
is pending again from its last checkpoint. ``--state FILE`` keeps the queue across a head restart.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class Queue:
    """Tasks ``0..n-1`` of ``units`` steps each; thread-safe; the contract is the module doc."""

    def __init__(self, tasks: int, units: int, lease_seconds: float, state: Path | None = None):
        self.units, self.lease_seconds, self.path = units, lease_seconds, state
        self.lock = threading.Lock()
        self.tasks = {
            str(i): {
                "status": "pending",
                "progress": 0,
                "state": None,
                "lease": None,
                "worker": None,
                "renewed": 0.0,
                "result": None,
                "completions": 0,
                "requeues": 0,
                "expired": 0,
                "redone_units": 0,
                "best_progress": 0,
            }
            for i in range(tasks)
        }
        self.refused = 0
        self.started = time.time()
        self.finished_at: float | None = None
        if state is not None and state.exists():
            saved = json.loads(state.read_text())
            self.tasks, self.refused, self.started = saved["tasks"], saved["refused"], saved["started"]

    def _save(self) -> None:
        if self.path is not None:
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps({"tasks": self.tasks, "refused": self.refused, "started": self.started}))
            tmp.replace(self.path)

    def _expire(self, now: float) -> None:
        for t in self.tasks.values():
            if t["status"] == "leased" and now - t["renewed"] > self.lease_seconds:
                t.update(status="pending", lease=None, worker=None)
                t["expired"] += 1

    def lease(self, worker: str) -> dict:
        with self.lock:
            now = time.time()
            self._expire(now)
            if all(t["status"] == "done" for t in self.tasks.values()):
                return {"finished": True}
            for name, t in self.tasks.items():
                if t["status"] == "pending":
                    lease = uuid.uuid4().hex
                    t.update(status="leased", lease=lease, worker=worker, renewed=now)
                    self._save()
                    return {
                        "task": name,
                        "lease": lease,
                        "progress": t["progress"],
                        "state": t["state"],
                        "units": self.units,
                    }
            return {"wait": True}

    def _held(self, body: dict) -> dict | None:
        t = self.tasks.get(str(body.get("task")))
        return t if t is not None and t["status"] == "leased" and t["lease"] == body.get("lease") else None

    def progress(self, body: dict, *, requeue: bool = False) -> bool:
        with self.lock:
            t = self._held(body)
            if t is None:
                return False
            t.update(progress=int(body["progress"]), state=body.get("state"), renewed=time.time())
            if requeue:
                t.update(status="pending", lease=None, worker=None)
                t["requeues"] += 1
            self._save()
            return True

    def done(self, body: dict) -> bool:
        with self.lock:
            t = self._held(body)
            if t is None:
                self.refused += 1
                self._save()
                return False
            t.update(status="done", lease=None, result=body.get("result"), progress=self.units)
            t["completions"] += 1
            if all(x["status"] == "done" for x in self.tasks.values()):
                self.finished_at = time.time()
            self._save()
            return True

    def note_start(self, task: str, start: int) -> None:
        """Units a worker does again: it resumed before the furthest point any worker reached."""
        with self.lock:
            t = self.tasks[task]
            t["redone_units"] += max(0, t["best_progress"] - start)

    def note_reached(self, task: str, reached: int) -> None:
        with self.lock:
            t = self.tasks[task]
            t["best_progress"] = max(t["best_progress"], reached)

    def status(self) -> dict:
        with self.lock:
            self._expire(time.time())
            done = [t for t in self.tasks.values() if t["status"] == "done"]
            return {
                "tasks": self.tasks,
                "done": len(done),
                "total": len(self.tasks),
                "finished": len(done) == len(self.tasks),
                "refused_completions": self.refused,
                "requeues": sum(t["requeues"] for t in self.tasks.values()),
                "expired_leases": sum(t["expired"] for t in self.tasks.values()),
                "redone_units": sum(t["redone_units"] for t in self.tasks.values()),
                "elapsed_seconds": (self.finished_at or time.time()) - self.started,
            }


def handler(queue: Queue) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # quiet: one line per request is noise
            pass

        def _reply(self, code: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/status":
                self._reply(200, queue.status())
            else:
                self._reply(404, {"error": "unknown path"})

        def do_POST(self) -> None:
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            except ValueError:
                self._reply(400, {"error": "body is not JSON"})
                return
            if self.path == "/lease":
                got = queue.lease(str(body.get("worker", "")))
                if "task" in got:
                    queue.note_start(got["task"], got["progress"])
                self._reply(200, got)
            elif self.path in ("/progress", "/requeue"):
                ok = queue.progress(body, requeue=self.path == "/requeue")
                if ok:
                    queue.note_reached(str(body["task"]), int(body["progress"]))
                self._reply(200 if ok else 409, {"ok": ok})
            elif self.path == "/done":
                ok = queue.done(body)
                self._reply(200 if ok else 409, {"ok": ok})
            else:
                self._reply(404, {"error": "unknown path"})

    return Handler


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=8700)
    ap.add_argument("--bind", default="0.0.0.0")
    ap.add_argument("--tasks", type=int, default=20)
    ap.add_argument("--units", type=int, default=50, help="steps per task")
    ap.add_argument("--lease-seconds", type=float, default=10.0)
    ap.add_argument("--state", type=Path, default=None, help="JSON file that keeps the queue across restarts")
    args = ap.parse_args()
    queue = Queue(args.tasks, args.units, args.lease_seconds, args.state)
    server = ThreadingHTTPServer((args.bind, args.port), handler(queue))
    print(f"queue head: {args.tasks} tasks of {args.units} units on port {args.port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
