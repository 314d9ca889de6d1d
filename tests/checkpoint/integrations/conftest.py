"""Fixtures for the framework glue tests: callbacks that are undone after each test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from fleet.checkpoint import CheckpointManager


@pytest.fixture
def glue() -> Iterator[Callable[..., Any]]:
    """``glue(cls, uri, **kwargs)`` builds ``cls(CheckpointManager(uri, keep_last=2), **kwargs)``;
    after the test its signal handlers are put back and its manager closed."""
    made: list[Any] = []

    def make(cls: Callable[..., Any], uri: str, **kwargs: Any) -> Any:
        made.append(cls(CheckpointManager(uri, keep_last=2), **kwargs))
        return made[-1]

    yield make
    for cb in made:
        if cb.stop is not None:
            cb.stop.uninstall()
        cb.mgr.close()
