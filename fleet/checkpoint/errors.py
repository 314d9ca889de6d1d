"""Errors of the checkpoint library; all are ``FleetError`` so the CLI prints them as one line."""

from __future__ import annotations

from fleet.errors import FleetError


class CheckpointError(FleetError):
    """Checkpoint storage is misconfigured, unreachable or refused a request."""


class CheckpointExistsError(CheckpointError):
    """Another writer already committed this step; the losing writer's data was removed."""

    def __init__(self, uri: str, step: int):
        self.uri = uri
        self.step = step
        super().__init__(f"{uri}: step {step} is already committed by another writer; "
                         "save under a new step number")


class CorruptCheckpointError(CheckpointError):
    """A committed checkpoint is missing, truncated or fails its checksum (readers skip it)."""


class UnsupportedStateError(CheckpointError, TypeError):
    """The state holds a value the safe serialiser cannot store; the message names its path."""
