"""The checksums that tell an intact checkpoint object from a corrupt one, by name.

A manifest names the algorithm its digests were made with (see :mod:`fleet.checkpoint.layout`):

- ``xxh3-128`` (what this library writes): XXH3, 128-bit, from the ``xxhash`` package, about
  0.04 s of CPU per GB against SHA-256's 0.6-1 s, so verifying every byte costs next to nothing
  beside the I/O. It detects accidental corruption (truncation, bit rot, a torn or mixed-up
  object); it is not a cryptographic hash, and nothing here relies on one: whoever can write the
  data object can write its manifest too.
- ``sha256``: what manifests of format ``/1`` recorded; read and verified as ever.

Both hash objects release the GIL on large buffers, so hashing runs on a thread beside the I/O.
A name that is not in :data:`ALGORITHMS` (a manifest from a newer version, or a hostile one) is
refused with :class:`UnknownDigestError`, never guessed at.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, Protocol

import xxhash


class Hasher(Protocol):
    def update(self, data: Any, /) -> None: ...

    def hexdigest(self) -> str: ...


ALGORITHMS: dict[str, Callable[[], Hasher]] = {
    "xxh3-128": xxhash.xxh3_128,
    "sha256": hashlib.sha256,
}
DEFAULT = "xxh3-128"
LEGACY = "sha256"  # the algorithm of every manifest of format /1
HEX_LENGTH = {"xxh3-128": 32, "sha256": 64}


class UnknownDigestError(ValueError):
    """A manifest names a digest algorithm this version does not know."""


def check(name: Any) -> str:
    """``name`` when it is a known algorithm; :class:`UnknownDigestError` naming it otherwise."""
    if isinstance(name, str) and name in ALGORITHMS:
        return name
    shown = repr(name)[:40].encode("ascii", "backslashreplace").decode()
    raise UnknownDigestError(
        f"digest algorithm {shown} is not one this version verifies "
        f"({', '.join(sorted(ALGORITHMS))}); a newer spotfleet may have written it: upgrade"
    )


def new(name: str) -> Hasher:
    """A fresh hash object of algorithm ``name`` (checked)."""
    return ALGORITHMS[check(name)]()


def label(name: str) -> str:
    """How messages name the algorithm: ``XXH3-128``, ``SHA-256``."""
    return {"sha256": "SHA-256"}.get(name, name.upper())
