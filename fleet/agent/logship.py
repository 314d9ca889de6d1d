"""Copy the node log to the fleet's bucket, so ``fleet logs`` reads it the same way everywhere.

:class:`LogShipper` runs in a thread beside ``fleet run``. Contract:

- Every ``interval`` seconds, when the node log changed (size or modification time), it uploads
  the log's tail (at most ``max_bytes``, cut at a line start) and then its index, at the keys of
  :mod:`fleet.nodelogs` under the checkpoint URI, through the checkpoint store of that URI's
  scheme (S3, GCS, Azure Blob, a directory). :meth:`close` uploads once more, marked final.
- It never breaks the job: a failure (storage refused or unreachable, the log not there yet,
  the instance id not known yet) is logged the first time, then every 20th time, and tried
  again at the next tick; a recovery is logged once. :meth:`close` waits at most
  ``close_timeout`` seconds for the final upload.
- The instance id is asked for in the thread (a metadata service may be slow to answer), and
  again at each tick until it is known.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from fleet.nodelogs import MAX_BYTES, NodeLog, index_key, log_key

if TYPE_CHECKING:
    from fleet.checkpoint.stores import ObjectStore

log = logging.getLogger("fleet.agent")

#: The node log's path on a node: ``$SPOTFLEET_NODE_LOG`` (the bootstrap and the local cloud set it).
NODE_LOG_ENV = "SPOTFLEET_NODE_LOG"
_REPORT_EVERY = 20


def node_log_path() -> Path:
    """``$SPOTFLEET_NODE_LOG``, else the bootstrap's log path."""
    from fleet.bootstrap import LOG_PATH

    return Path(os.environ.get(NODE_LOG_ENV) or LOG_PATH)


class LogShipper:
    """Uploads ``path`` under ``uri`` for the instance ``instance()`` names (see the module docstring)."""

    def __init__(
        self,
        uri: str,
        path: Path,
        instance: Callable[[], str],
        *,
        interval: float = 5.0,
        max_bytes: int = MAX_BYTES,
        close_timeout: float = 30.0,
        store: ObjectStore | None = None,
        clock: Callable[[], float] = time.time,
    ):
        self.uri = uri
        self.path = path
        self._instance_of = instance
        self.interval = interval
        self.max_bytes = max_bytes
        self.close_timeout = close_timeout
        self._store = store
        self._clock = clock
        self.instance = ""
        self.uploads = 0
        self._seen: tuple[int, int] | None = None
        self._failures = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> LogShipper:
        self._thread = threading.Thread(target=self._run, name="fleet-logship", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        """Make the final upload (waiting at most ``close_timeout`` s) and stop."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.close_timeout)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._attempt(final=False)
        self._attempt(final=True)

    def _attempt(self, *, final: bool) -> None:
        try:
            shipped = self.ship_once(final=final)
        except Exception as err:  # noqa: BLE001  (nothing here may stop the job: log and retry)
            self._failures += 1
            if self._failures == 1 or self._failures % _REPORT_EVERY == 0:
                log.warning(
                    "node log not uploaded to %s (%s; attempt %d, trying again in %g s)",
                    self.uri,
                    err,
                    self._failures,
                    self.interval,
                )
            return
        if shipped and self._failures:
            log.info("node log uploaded again after %d failed attempt(s)", self._failures)
            self._failures = 0

    def ship_once(self, *, final: bool = False) -> bool:
        """Upload the log if it changed since the last upload (always when ``final``); True when
        something was uploaded. Raises whatever the store or the file raised."""
        if not self.instance:
            self.instance = self._instance_of()
            if not self.instance:
                raise RuntimeError("this node's instance id is unknown (set $SPOTFLEET_INSTANCE_ID)")
        st = self.path.stat()
        mark = (st.st_size, st.st_mtime_ns)
        if mark == self._seen and not final:
            return False
        offset, data = self._tail(st.st_size)
        meta = NodeLog(self.instance, offset + len(data), offset, len(data), self._clock(), final)
        store = self._open()
        from fleet.checkpoint.payload import Payload

        store.upload(log_key(self.instance), Payload.of([data]))
        store.upload(index_key(self.instance), Payload.of([meta.to_json().encode()]))
        self._seen = mark
        self.uploads += 1
        return True

    def _tail(self, size: int) -> tuple[int, bytes]:
        """(offset, bytes): the log from ``offset`` to its end, at most ``max_bytes``, cut after a
        newline when the head had to go."""
        offset = max(0, size - self.max_bytes)
        with open(self.path, "rb") as f:
            f.seek(offset)
            data = f.read(size - offset)
        if offset:
            cut = data.find(b"\n")
            if 0 <= cut < len(data) - 1:
                offset, data = offset + cut + 1, data[cut + 1 :]
        return offset, data

    def _open(self) -> ObjectStore:
        if self._store is None:
            from fleet.checkpoint.stores import open_store

            self._store = open_store(self.uri)
        return self._store
