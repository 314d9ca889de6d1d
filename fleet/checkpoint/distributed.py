"""Sharded saves of a ``torch.distributed`` job: every rank writes its shard, one commit.

Protocol (the way PyTorch Distributed Checkpoint works, on the layout of
:mod:`fleet.checkpoint.layout`):

1. rank 0 checks the step is not below a newer valid checkpoint and broadcasts a fresh token;
2. every rank serialises its own state and uploads it to ``data/step-N-<token>-r<rank>.ckpt``
   (the uncommitted area: no reader looks there without a manifest);
3. the ranks exchange their outcomes (``all_gather_object``, a barrier): when every rank has
   written, rank 0 commits one manifest listing all shards in rank order and prunes; when any rank
   failed, nobody commits, each rank removes its own shard and every rank raises
   :class:`CheckpointError` naming the failed ranks;
4. rank 0 broadcasts the commit's outcome, so every rank returns the same info or raises.

A rank that dies before step 3 makes the others fail in the collective (gloo/NCCL report the lost
peer, or the process group's timeout does): the step stays invisible and the previous checkpoint
stays the newest. Loading agrees on a step first (rank 0 lists the intact checkpoints), then every
rank downloads and verifies its own shard; if any rank's shard fails its check, all ranks fall back
to the next older checkpoint together. A checkpoint written by N ranks loads with N ranks.

Collectives use the default process group unless ``group`` is given; saves are synchronous (no
collectives from a background thread).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import torch.distributed as dist

from fleet.checkpoint import codec
from fleet.checkpoint.commit import discard, new_token
from fleet.checkpoint.errors import CheckpointError, CorruptCheckpointError
from fleet.checkpoint.layout import CheckpointInfo
from fleet.checkpoint.manager import CheckpointManager

log = logging.getLogger("fleet.checkpoint")


def active(group: Any = None) -> bool:
    """Whether a process group of more than one rank is initialised."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size(group) > 1


def broadcast(value: Any, group: Any) -> Any:
    """``value`` of the group's first rank, on every rank."""
    box = [value]
    dist.broadcast_object_list(box, src=dist.get_global_rank(group, 0) if group is not None else 0, group=group)
    return box[0]


def gather(value: Any, group: Any) -> list[Any]:
    """Every rank's ``value``, in rank order, on every rank."""
    out: list[Any] = [None] * dist.get_world_size(group)
    dist.all_gather_object(out, value, group=group)
    return out


def outcome(fn: Any) -> tuple[Any, BaseException | None]:
    """``(fn(), None)`` or ``(None, error)``: a rank reports its failure to the others before raising."""
    try:
        return fn(), None
    except Exception as err:  # reported to every rank, then raised here
        return None, err


def fresh_token(mgr: CheckpointManager, step: int) -> str:
    """A new data token once ``step`` is known not to lie below a newer valid checkpoint."""
    mgr.check_fresh(step)
    return new_token()


def save_sharded(
    mgr: CheckpointManager,
    state: dict[str, Any],
    step: int,
    *,
    metrics: Mapping[str, float] | None = None,
    group: Any = None,
) -> CheckpointInfo:
    """Save this rank's ``state`` (storable values) as its shard of ``step``; a collective call.

    Returns the committed info on every rank; raises :class:`CheckpointError` on every rank when
    any rank failed (nothing is committed then).
    """
    rank = dist.get_rank(group)
    head = outcome(lambda: fresh_token(mgr, step)) if rank == 0 else (None, None)
    token = broadcast(head[0], group)
    if head[1] is not None:
        raise head[1]
    if token is None:
        raise CheckpointError(f"{mgr.uri}: rank 0 refused to save step {step} (see rank 0's error)")
    step = int(step)
    part, err = outcome(lambda: mgr.upload_part(codec.encode(state), step, f"{token}-r{rank}"))
    results = gather(part if err is None else f"{type(err).__name__}: {err}", group)
    failed = [(r, msg) for r, msg in enumerate(results) if isinstance(msg, str)]
    if failed:
        if part is not None:
            discard(mgr.store, [part.key])
        summary = "; ".join(f"rank {r}: {msg}" for r, msg in failed)
        raise CheckpointError(f"{mgr.uri}: step {step} not committed: {summary}") from err
    commit = outcome(lambda: mgr.commit_parts(step, results, metrics=metrics)) if rank == 0 else (None, None)
    info = broadcast(commit[0] if commit[1] is None else f"{type(commit[1]).__name__}: {commit[1]}", group)
    if commit[1] is not None:
        raise commit[1]
    if isinstance(info, str):
        raise CheckpointError(f"{mgr.uri}: rank 0 could not commit step {step}: {info}")
    return info


def load_sharded(
    mgr: CheckpointManager, *, step: int | None = None, group: Any = None
) -> tuple[dict[str, Any], CheckpointInfo] | None:
    """This rank's shard of the newest checkpoint every rank can verify (or of ``step``); a
    collective call. None on every rank when there is no such checkpoint."""
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    listed = outcome(lambda: [i for i in mgr.intact() if step is None or i.step == step]) if rank == 0 else (None, None)
    infos = broadcast(listed[0] if listed[1] is None else f"{type(listed[1]).__name__}: {listed[1]}", group)
    if listed[1] is not None:
        raise listed[1]
    if isinstance(infos, str):
        raise CheckpointError(f"{mgr.uri}: rank 0 could not list checkpoints: {infos}")
    for info in infos:
        if len(info.objects) != world:
            raise CheckpointError(
                f"{mgr.uri}: step {info.step} was saved by {len(info.objects)} rank(s); "
                f"this job has {world}: load it with the same world size (an elastic job "
                "whose world size changes must save with fleet.checkpoint.dcp, which reshards)"
            )
        tree, err = outcome(lambda: codec.decode(mgr.fetch_part(info, rank)))
        kind = "" if err is None else "corrupt" if isinstance(err, CorruptCheckpointError) else "error"
        verdicts = gather((kind, "" if err is None else f"{type(err).__name__}: {err}"), group)
        if any(k == "error" for k, _ in verdicts):
            if kind == "error":
                raise err  # type: ignore[misc]
            raise CheckpointError(
                f"{mgr.uri}: loading step {info.step} failed on another rank: "
                + "; ".join(f"rank {r}: {m}" for r, (k, m) in enumerate(verdicts) if k == "error")
            )
        bad = [(r, m) for r, (k, m) in enumerate(verdicts) if k]
        if not bad:
            return tree, info
        log.warning(
            "%s: skipping step %d: %s; falling back to an older checkpoint",
            mgr.uri,
            info.step,
            "; ".join(f"rank {r}: {m}" for r, m in bad),
        )
    return None
