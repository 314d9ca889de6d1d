"""Where checkpoints live under a store prefix, and the manifest that commits one.

::

    data/step-000000001200-<token>.ckpt     the serialised state; unique per writer, never overwritten
    commits/step-000000001200.json          the manifest: created once, only if absent (the commit)

A checkpoint exists for readers exactly when its manifest exists. The manifest names the data
object and records its size and SHA-256, so a reader can tell a complete, intact checkpoint from
a truncated or corrupted one. Step numbers are zero-padded so names sort in step order.

A sharded checkpoint (one object per rank of a distributed job, or a DCP checkpoint) has more
than one data object: the manifest's ``data_key``/``size``/``sha256`` describe the first and
``parts`` lists the others, each with its own size and SHA-256, all of the same step. Every
object is written before the one manifest that makes the step visible.

A manifest is untrusted input (anyone with write access to the location may have put it there):
it is size-capped before parsing, a nesting too deep for the parser is "not a manifest", and its
data key must be exactly a data name of its own step (no ``..``, no other folder), so a reader
never follows a manifest outside the layout.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field

FORMAT = "spotfleet-checkpoint/1"
DATA_DIR = "data/"
COMMIT_DIR = "commits/"
_STEP_WIDTH = 12
_COMMIT_RE = re.compile(r"^commits/step-(\d{12})\.json$")
_ANY_STEP_RE = re.compile(r"^(?:data|commits)/step-(\d{12})")
_DATA_RE = re.compile(r"^data/step-(\d{12})-[0-9A-Za-z_-]{1,64}\.ckpt$")
# what this layout writes: data objects, manifests, and the temporary files of a crashed writer
# (``<name>.partial`` of an upload, ``<name>.<32 hex>.partial`` of a commit)
_OURS_RE = re.compile(r"^(?:data/step-\d{12}-[0-9A-Za-z_-]{1,64}\.ckpt|commits/step-\d{12}\.json)"
                      r"(?:\.[0-9a-f]{32})?(?:\.partial)?$")
MAX_MANIFEST_BYTES = 1024 * 1024    # a few hundred bytes, ~150 more per part; anything larger is not ours


@dataclass(frozen=True)
class Part:
    """One data object of a checkpoint: its key under the store prefix, size and SHA-256."""

    key: str
    size: int
    sha256: str


@dataclass(frozen=True)
class CheckpointInfo:
    """One committed checkpoint, as recorded in its manifest."""

    step: int
    name: str               # "step-000000001200"
    size: int               # bytes of the data object
    sha256: str             # hex digest of the data object
    committed_at: float     # epoch seconds, the writer's clock at commit
    data_key: str = ""      # the data object, relative to the store prefix
    writer: str = ""        # "host:pid" of the process that committed it
    metrics: dict[str, float] = field(default_factory=dict, compare=False, hash=False)
    # numbers the writer recorded with the checkpoint (``save(..., metrics=...)``), for retention
    parts: tuple[Part, ...] = field(default=(), compare=False, hash=False)
    # the further data objects of a sharded checkpoint (rank 1.. of a distributed save)

    @property
    def objects(self) -> tuple[Part, ...]:
        """Every data object of the checkpoint, the first (``data_key``) first."""
        return (Part(self.data_key, self.size, self.sha256), *self.parts)

    def to_manifest(self) -> bytes:
        doc = {"format": FORMAT, **asdict(self)}
        if not self.parts:
            del doc["parts"]                  # single-object manifests stay as they always were
        return json.dumps(doc, sort_keys=True).encode()

    @classmethod
    def from_manifest(cls, raw: bytes) -> CheckpointInfo:
        """Parse a manifest; raises ``ValueError`` when it is not one this library wrote.

        Bounded: a document over :data:`MAX_MANIFEST_BYTES` or nested too deeply to parse is
        refused before or while parsing; a data key outside ``data/step-N-<token>.ckpt`` of its
        own step is refused before anything reads it.
        """
        if len(raw) > MAX_MANIFEST_BYTES:
            raise ValueError(f"{len(raw)} bytes, more than a manifest holds ({MAX_MANIFEST_BYTES})")
        try:
            doc = json.loads(raw)
        except RecursionError:
            raise ValueError("nested too deeply to be a manifest") from None
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} manifest")
        info = cls(step=int(doc["step"]), name=str(doc["name"]), size=int(doc["size"]),
                   sha256=str(doc["sha256"]), committed_at=float(doc["committed_at"]),
                   data_key=str(doc["data_key"]), writer=str(doc.get("writer", "")),
                   metrics=_metrics(doc.get("metrics", {})), parts=_parts(doc.get("parts", [])))
        for part in info.objects:
            m = _DATA_RE.match(part.key)
            if m is None:
                raise ValueError(f"data key {part.key[:80]!r} is outside the layout")
            if int(m.group(1)) != info.step:
                raise ValueError("manifest names a data object of another step")
        return info


def _parts(raw: object) -> tuple[Part, ...]:
    if not isinstance(raw, list):
        raise ValueError("parts is not a list")
    return tuple(Part(key=str(p["key"]), size=int(p["size"]), sha256=str(p["sha256"])) for p in raw)


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
