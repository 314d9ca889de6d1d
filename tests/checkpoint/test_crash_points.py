"""Mid-write kill: a writer dies at a random point of its save path; the next run always resumes
from the last complete checkpoint, and no reader ever sees a partial one.

Each trial forks a child that does what a restarted job does (resume from the newest checkpoint,
then save the next steps) against the real store, wrapped so that it ``os._exit()``s at its n-th
storage event: before/after each store call, and after every block read from the payload while
uploading (mid-transfer). ``os._exit`` runs no cleanup, like ``kill -9``. Crash points come from
a seeded RNG, so a failure is reproducible.
"""

from __future__ import annotations

import os
import random
import signal
import traceback
from collections import Counter

import numpy as np
import pytest

from fleet.checkpoint import CheckpointManager
from fleet.checkpoint.layout import committed_step
from fleet.checkpoint.payload import ChunkReader
from fleet.checkpoint.stores.base import MiB

KILLED = 86
TRIALS = {"file": 100, "s3": 30, "gs": 30, "az": 30}
STEPS_PER_RUN = 3


def state_for(step: int, size: int) -> dict:
    """Every third step is ``size`` bytes (large enough for the multipart path), the rest small."""
    n = size // 8 if step % 3 == 0 else 4096
    return {"w": np.arange(n, dtype=np.float64) + step, "step": step}


class _TickingReader(ChunkReader):
    def __init__(self, chunks, tick, max_read: int | None):
        super().__init__(chunks)
        self._tick, self._max = tick, max_read

    def readinto(self, buffer):
        view = memoryview(buffer).cast("B")
        n = super().readinto(view[: self._max] if self._max else view)
        self._tick("upload-mid")
        return n


class _TickingPayload:
    def __init__(self, payload, tick, max_read):
        self._payload, self._tick, self._max = payload, tick, max_read
        self.size = payload.size

    def reader(self):
        return _TickingReader(self._payload.chunks, self._tick, self._max)

    def blocks(self, size):
        for piece in self._payload.blocks(min(size, self._max) if self._max else size):
            yield piece
            self._tick("upload-mid")

    def slice(self, start, n):
        return _TickingPayload(self._payload.slice(start, n), self._tick, self._max)

    def digest(self, algorithm):
        return self._payload.digest(algorithm)


class CrashingStore:
    """A real store that exits the process at its ``crash_at``-th event and reports commits."""

    def __init__(self, inner, crash_at: int, fd: int, max_read: int | None):
        self._inner, self._crash_at, self._fd, self._max_read = inner, crash_at, fd, max_read
        self.uri = inner.uri
        self.events = 0

    def _tick(self, where: str) -> None:
        self.events += 1
        if self.events == self._crash_at:
            os.write(self._fd, f"crash {where}\n".encode())
            os._exit(KILLED)

    def _call(self, name, *args):
        self._tick(f"{name}-before")
        result = getattr(self._inner, name)(*args)
        self._tick(f"{name}-after")
        return result

    def upload(self, key, payload):
        return self._call("upload", key, _TickingPayload(payload, self._tick, self._max_read))

    def create(self, key, data):
        self._tick("create-before")
        created = self._inner.create(key, data)
        if created and committed_step(key) is not None:
            os.write(self._fd, f"committed {committed_step(key)}\n".encode())
        self._tick("create-after")
        return created

    def read(self, key):
        return self._call("read", key)

    def download(self, key, size, into=None):
        return self._call("download", key, size, into)

    def size(self, key):
        return self._call("size", key)

    def list(self, prefix):
        return self._call("list", prefix)

    def delete(self, key):
        return self._call("delete", key)


def run_child(location, crash_at: int, size: int, max_read: int | None) -> tuple[int, list[str]]:
    """Fork a writer that resumes and saves until it crashes; returns (exit code, its reports)."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never returns into pytest
        code = 1
        try:
            signal.alarm(60)  # a hung child dies instead of hanging the test
            os.close(rfd)
            store = CrashingStore(location.store(), crash_at, wfd, max_read)
            mgr = CheckpointManager(store=store, keep_last=2)
            resumed = mgr.load_latest()
            step = 0
            if resumed is not None:
                state, info = resumed
                step = info.step
                if state["step"] != step or not np.array_equal(state["w"], state_for(step, size)["w"]):
                    os._exit(3)
            for s in range(step + 1, step + 1 + STEPS_PER_RUN):
                mgr.save(state_for(s, size), s)
            code = 0
        except BaseException:
            os.write(wfd, ("error " + traceback.format_exc().replace("\n", " | ") + "\n").encode())
        finally:
            os._exit(code)
    os.close(wfd)
    with os.fdopen(rfd) as pipe:
        reports = pipe.read().splitlines()
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), reports


@pytest.mark.parametrize("kind", list(TRIALS))
def test_kill_during_save_always_resumes_from_last_complete(location_factory, kind):
    location = location_factory(kind)
    # large states - local: 1 MiB read in 256 KiB blocks (crashes inside the file write); object
    # stores: 6 MiB with 5 MiB parts, so multipart/composite/block uploads are interrupted too
    size, max_read = (1 * MiB, 256 * 1024) if kind == "file" else (6 * MiB, None)
    rng = random.Random(f"crash-points-{kind}-v2")
    expected: int | None = None
    where = Counter()
    reader = CheckpointManager(location.uri, env=location.env, keep_last=2)
    for trial in range(TRIALS[kind]):
        code, reports = run_child(location, rng.randrange(1, 70), size, max_read)
        assert code in (0, KILLED), f"trial {trial}: writer failed with exit code {code}: {reports}"
        for line in reports:
            word, arg = line.split(" ", 1)
            if word == "committed":
                expected = int(arg)
            else:
                where[arg.split("-")[0]] += 1
        resumed = reader.load_latest()
        if expected is None:
            assert resumed is None, f"trial {trial}: found a checkpoint before any commit"
            continue
        state, info = resumed
        assert info.step == expected, f"trial {trial}: resumed at {info.step}, last commit was {expected}"
        np.testing.assert_array_equal(state["w"], state_for(expected, size)["w"])
        for visible in reader.list():  # no reader ever sees a partial checkpoint
            assert reader.load(visible)["step"] == visible.step
    assert expected is not None and expected >= TRIALS[kind] // 2
    assert {"upload", "create", "delete", "list"} <= set(where), where  # crash points spread over the path
