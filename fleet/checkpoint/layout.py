"""Where checkpoints live under a store prefix, and the manifest that commits one.

::

    data/step-000000001200-<token>.ckpt     the serialised state; unique per writer, never overwritten
    commits/step-000000001200.json          the manifest: created once, only if absent (the commit)

A checkpoint exists for readers exactly when its manifest exists. The manifest names the data
object and records its size and digest, so a reader can tell a complete, intact checkpoint from
a truncated or corrupted one. Step numbers are zero-padded so names sort in step order.

Manifest formats (both are read; this version writes ``/2``):

- ``spotfleet-checkpoint/2``: ``algorithm`` names the digest algorithm of every object
  (``xxh3-128``; see :mod:`fleet.checkpoint.digest`), ``digest`` is the first object's;
- ``spotfleet-checkpoint/1``: no ``algorithm``; ``sha256`` is the first object's SHA-256.
  An info whose algorithm is ``sha256`` is written in this format, byte for byte as before.

A sharded checkpoint (one object per rank of a distributed job, or a DCP checkpoint) has more
than one data object: the manifest's ``data_key``/``size``/digest describe the first and
``parts`` lists the others, each with its own size and digest (same algorithm), all of the same
step. Every object is written before the one manifest that makes the step visible.

A manifest is untrusted input (anyone with write access to the location may have put it there):
it is size-capped before parsing, a nesting too deep for the parser is "not a manifest", and its
data key must be exactly a data name of its own step (no ``..``, no other folder), so a reader
never follows a manifest outside the layout; a digest algorithm it does not know is refused
(:class:`~fleet.checkpoint.digest.UnknownDigestError`, a ``ValueError``), never guessed.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field

from fleet.checkpoint import digest as digests

FORMAT = "spotfleet-checkpoint/2"
FORMAT_V1 = "spotfleet-checkpoint/1"  # SHA-256 only; still read, and written for sha256 infos
DATA_DIR = "data/"
COMMIT_DIR = "commits/"
_STEP_WIDTH = 12
_COMMIT_RE = re.compile(r"^commits/step-(\d{12})\.json$")
_ANY_STEP_RE = re.compile(r"^(?:data|commits)/step-(\d{12})")
_DATA_RE = re.compile(r"^data/step-(\d{12})-[0-9A-Za-z_-]{1,64}\.ckpt$")
# what this layout writes: data objects, manifests, and the temporary files of a crashed writer
# (``<name>.partial`` of an upload, ``<name>.<32 hex>.partial`` of a commit)
_OURS_RE = re.compile(
    r"^(?:data/step-\d{12}-[0-9A-Za-z_-]{1,64}\.ckpt|commits/step-\d{12}\.json)"
    r"(?:\.[0-9a-f]{32})?(?:\.partial)?$"
)
MAX_MANIFEST_BYTES = 1024 * 1024  # a few hundred bytes, ~150 more per part; anything larger is not ours


@dataclass(frozen=True)
class Part:
    """One data object of a checkpoint: its key under the store prefix, size, and hex digest
    made with ``algorithm`` (a name of :data:`fleet.checkpoint.digest.ALGORITHMS`)."""

    key: str
    size: int
    digest: str
    algorithm: str = digests.DEFAULT


@dataclass(frozen=True)
class CheckpointInfo:
    """One committed checkpoint, as recorded in its manifest."""

    step: int
    name: str  # "step-000000001200"
    size: int  # bytes of the data object
    digest: str  # hex digest of the data object, made with ``algorithm``
    committed_at: float  # epoch seconds, the writer's clock at commit
    data_key: str = ""  # the data object, relative to the store prefix
    writer: str = ""  # "host:pid" of the process that committed it
    metrics: dict[str, float] = field(default_factory=dict, compare=False, hash=False)
    # numbers the writer recorded with the checkpoint (``save(..., metrics=...)``), for retention
    parts: tuple[Part, ...] = field(default=(), compare=False, hash=False)
    # the further data objects of a sharded checkpoint (rank 1.. of a distributed save)
    algorithm: str = digests.DEFAULT  # of every object's digest

    @property
    def objects(self) -> tuple[Part, ...]:
        """Every data object of the checkpoint, the first (``data_key``) first."""
        return (Part(self.data_key, self.size, self.digest, self.algorithm), *self.parts)

    def to_manifest(self) -> bytes:
        """The manifest's bytes: format ``/2``, or ``/1`` (as it always was) for SHA-256 digests.
        Raises ``ValueError`` when a part's algorithm differs from the info's."""
        if any(p.algorithm != self.algorithm for p in self.parts):
            raise ValueError(
                f"every object of a checkpoint needs one digest algorithm "
                f"({sorted({self.algorithm, *(p.algorithm for p in self.parts)})})"
            )
        legacy = self.algorithm == digests.LEGACY
        name = "sha256" if legacy else "digest"
        doc: dict[str, object] = {
            "format": FORMAT_V1 if legacy else FORMAT,
            "step": self.step,
            "name": self.name,
            "size": self.size,
            name: self.digest,
            "committed_at": self.committed_at,
            "data_key": self.data_key,
            "writer": self.writer,
            "metrics": self.metrics,
        }
        if not legacy:
            doc["algorithm"] = self.algorithm
        if self.parts:  # single-object manifests have no parts list
            doc["parts"] = [{"key": p.key, "size": p.size, name: p.digest} for p in self.parts]
        return json.dumps(doc, sort_keys=True).encode()

    @classmethod
    def from_manifest(cls, raw: bytes) -> CheckpointInfo:
        """Parse a manifest; raises ``ValueError`` when it is not one this library wrote.

        Bounded: a document over :data:`MAX_MANIFEST_BYTES` or nested too deeply to parse is
        refused before or while parsing; a data key outside ``data/step-N-<token>.ckpt`` of its
        own step is refused before anything reads it, and so is an unknown digest algorithm
        (:class:`~fleet.checkpoint.digest.UnknownDigestError`).
        """
        if len(raw) > MAX_MANIFEST_BYTES:
            raise ValueError(f"{len(raw)} bytes, more than a manifest holds ({MAX_MANIFEST_BYTES})")
        try:
            doc = json.loads(raw)
        except RecursionError:
            raise ValueError("nested too deeply to be a manifest") from None
        if not isinstance(doc, dict) or doc.get("format") not in (FORMAT, FORMAT_V1):
            raise ValueError(f"not a {FORMAT} (or /1) manifest")
        if doc["format"] == FORMAT_V1:
            algorithm, name = digests.LEGACY, "sha256"
        else:
            algorithm, name = digests.check(doc.get("algorithm")), "digest"
        info = cls(
            step=int(doc["step"]),
            name=str(doc["name"]),
            size=int(doc["size"]),
            digest=_hex(doc[name]),
            committed_at=float(doc["committed_at"]),
            data_key=str(doc["data_key"]),
            writer=str(doc.get("writer", "")),
            metrics=_metrics(doc.get("metrics", {})),
            parts=_parts(doc.get("parts", []), name, algorithm),
            algorithm=algorithm,
        )
        for part in info.objects:
            m = _DATA_RE.match(part.key)
            if m is None:
                raise ValueError(f"data key {part.key[:80]!r} is outside the layout")
            if int(m.group(1)) != info.step:
                raise ValueError("manifest names a data object of another step")
        return info


def _parts(raw: object, name: str, algorithm: str) -> tuple[Part, ...]:
    if not isinstance(raw, list):
        raise ValueError("parts is not a list")
    return tuple(Part(key=str(p["key"]), size=int(p["size"]), digest=_hex(p[name]), algorithm=algorithm) for p in raw)


def _hex(raw: object) -> str:
    """A recorded digest: a short string (what it must equal is checked on download)."""
    if not isinstance(raw, str) or len(raw) > 128:
        raise ValueError("a digest is not a hex string")
    return raw


def _metrics(raw: object) -> dict[str, float]:
    if not isinstance(raw, dict):
        raise ValueError("metrics is not a mapping")
    out = {str(k): float(v) for k, v in raw.items()}
    if not all(math.isfinite(v) for v in out.values()):
        raise ValueError("metrics hold a value that is not a finite number")
    return out


def step_name(step: int) -> str:
    return f"step-{step:0{_STEP_WIDTH}d}"


def commit_key(step: int) -> str:
    return f"{COMMIT_DIR}{step_name(step)}.json"


def data_key(step: int, token: str) -> str:
    return f"{DATA_DIR}{step_name(step)}-{token}.ckpt"


def committed_step(key: str) -> int | None:
    """The step of a commit key (``commits/step-N.json``), None for anything else."""
    m = _COMMIT_RE.match(key)
    return int(m.group(1)) if m else None


def ours(key: str) -> bool:
    """Whether ``key`` has a name this layout writes (anything else in a location is never
    deleted: it was put there by someone else)."""
    return _OURS_RE.match(key) is not None


def step_of(key: str) -> int | None:
    """The step any object of the layout belongs to (data, commit, or a leftover partial)."""
    m = _ANY_STEP_RE.match(key)
    return int(m.group(1)) if m else None
