"""The agent's view of the job's checkpoints: "is there one committed since the hook fired?"

A thin seam over :class:`fleet.checkpoint.CheckpointManager` (imported lazily: nodes without a
checkpoint URI never need it). Read failures are logged and treated as "not yet" so a storage
hiccup during the final seconds never crashes the agent.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from fleet.errors import FleetError

log = logging.getLogger("fleet.agent")


class CheckpointProbe:
    """Reads the newest valid checkpoint under ``uri`` (``$SPOTFLEET_CHECKPOINT_URI`` when None)."""

    def __init__(self, uri: str | None = None):
        self.uri = uri or os.environ.get("SPOTFLEET_CHECKPOINT_URI", "")
        if not self.uri:
            raise FleetError("no checkpoint URI; pass --checkpoint-uri or set $SPOTFLEET_CHECKPOINT_URI")
        try:
            from fleet.checkpoint import CheckpointManager
        except ImportError as err:
            raise FleetError(
                f"the checkpoint library cannot be loaded ({err}); install spotfleet's "
                "storage extra for this URI scheme"
            ) from err
        self.manager = CheckpointManager(self.uri)

    def check(self) -> None:
        """Read the storage once, raising a one-line :class:`FleetError` when it cannot be read
        (missing bucket, refused credentials, unreachable endpoint): a configuration error to
        report before starting a job that could never save."""
        try:
            self.manager.latest()
        except FleetError as err:
            raise FleetError(f"checkpoint storage cannot be used: {err}") from err
        except Exception as err:  # SDK errors a backend did not translate
            raise FleetError(f"checkpoint storage {self.uri} cannot be used: {err}") from err

    def latest(self) -> Any | None:
        """The newest valid CheckpointInfo, or None (also when storage cannot be read right now)."""
        try:
            return self.manager.latest()
        except Exception as err:  # storage SDK errors vary by backend; never crash the node
            log.warning("cannot read checkpoints at %s: %s", self.uri, err)
            return None

    def latest_step(self) -> int:
        """Step of the newest checkpoint that verifies (every data object read and its checksum
        checked, as a loader does), 0 when there is none: the step the job's loader will resume
        from, never a corrupt newer one it will skip. Raises FleetError (one line, with the cause)
        when storage cannot be read, so a job is never told to start over from step 0 while its
        checkpoints are merely out of reach."""
        try:
            info = self.manager.latest(verify=True)
        except Exception as err:  # storage SDK errors vary by backend
            raise FleetError(f"checkpoint storage {self.uri} cannot be read: {err}") from err
        return int(info.step) if info is not None else 0

    def committed_since(self, since: float) -> Any | None:
        """The newest valid checkpoint if it was committed at or after ``since`` (epoch s), else None."""
        info = self.latest()
        if info is not None and float(info.committed_at) >= since:
            return info
        return None
