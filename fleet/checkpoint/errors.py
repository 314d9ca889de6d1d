"""Errors of the checkpoint library; all are ``FleetError`` so the CLI prints them as one line."""

from __future__ import annotations

from fleet.errors import FleetError


class CheckpointError(FleetError):
    """Checkpoint storage is misconfigured, unreachable or refused a request."""


class CheckpointExistsError(CheckpointError):
    """This step is already committed with other content; the losing writer's data was removed.

    (Saving a step again with the content it already holds is not an error: it is a no-op.)
    """

    def __init__(self, uri: str, step: int, writer: str = ""):
        self.uri = uri
        self.step = step
        by = f" by {writer}" if writer else ""
        super().__init__(
            f"{uri}: step {step} is already committed{by} with other content; save under a new step number"
        )


class StaleStepError(CheckpointError):
    """The location holds a newer valid checkpoint, so a save at this step would never be resumed
    from (and keep-last-N retention would remove it at once); nothing was written."""

    def __init__(self, uri: str, step: int, newest: int):
        self.uri, self.step, self.newest = uri, step, newest
        super().__init__(
            f"{uri}: refusing to save step {step}: this location already holds step {newest}, "
            "so a resume would never use it; save a new run to a fresh location "
            "(or delete the newer checkpoints)"
        )


class CorruptCheckpointError(CheckpointError):
    """A committed checkpoint is missing, truncated or fails its checksum (readers skip it)."""


class UnsupportedStateError(CheckpointError, TypeError):
    """The state holds a value the safe serialiser cannot store; the message names its path."""
