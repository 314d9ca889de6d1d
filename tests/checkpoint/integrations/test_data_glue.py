"""The data position through fleet.checkpoint: StatefulDataLoader with workers, ElasticSampler across ranks.

Real torchdata ``StatefulDataLoader`` with 2 worker processes (skipped where the ``data`` extra is
absent); the samplers are exercised at several world sizes without a process group (each rank's
sampler is built with its ``num_replicas`` and ``rank``, as torchrun's ranks would).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
stateful = pytest.importorskip("torchdata.stateful_dataloader")

from fleet.checkpoint import CheckpointManager, DataPosition  # noqa: E402
from fleet.checkpoint.integrations.data import ElasticSampler  # noqa: E402
from fleet.checkpoint.torch import ResumableSampler, load, save  # noqa: E402

SIZE, BATCH, USED = 256, 8, 12  # 12 batches of 8: the loop has used 96 samples


def samples(batches) -> list[int]:
    return [int(i) for b in batches for i in b]


def loader(**kwargs) -> stateful.StatefulDataLoader:
    return stateful.StatefulDataLoader(
        list(range(SIZE)),
        batch_size=BATCH,
        shuffle=True,
        num_workers=2,
        generator=torch.Generator().manual_seed(5),
        **kwargs,
    )


def test_a_stateful_loader_with_two_workers_resumes_at_the_exact_sample(tmp_path):
    mgr = CheckpointManager(f"file://{tmp_path}")
    first = loader()
    it = iter(first)
    used = samples(next(it) for _ in range(USED))
    save(mgr, {"loader": first, "step": USED}, USED)  # the loader is a stateful object, like a module
    del it

    restarted = loader()
    sd = {"loader": restarted, "step": 0}
    assert load(mgr, sd) is not None and sd["step"] == USED
    rest = samples(restarted)
    assert len(used) == USED * BATCH and len(rest) == SIZE - USED * BATCH
    assert sorted(used + rest) == list(range(SIZE))  # nothing repeated, nothing skipped

    straight = samples(loader())  # and in the same order as an unbroken epoch
    assert used + rest == straight


def test_a_plain_loader_with_two_workers_counts_samples_it_only_prefetched():
    """Why the StatefulDataLoader: a sampler's own count runs ahead of the loop with workers."""
    position = DataPosition(size=SIZE, batch_size=BATCH, seed=5)
    plain = torch.utils.data.DataLoader(
        list(range(SIZE)), batch_size=BATCH, num_workers=2, sampler=ResumableSampler(position)
    )
    it = iter(plain)
    for _ in range(USED):
        next(it)
    assert position.offset > USED * BATCH  # prefetched batches counted as used
    del it


def consume(samplers: list[ElasticSampler], per_rank: int) -> list[int]:
    """Every rank takes ``per_rank`` samples of its stripe and reports them (one synchronous step each)."""
    taken: list[int] = []
    for s in samplers:
        stripe = iter(s)
        taken += [next(stripe) for _ in range(per_rank)]
        s.advance(per_rank)
    return taken


def ranks(world: int, **kwargs) -> list[ElasticSampler]:
    return [ElasticSampler(range(100), num_replicas=world, rank=r, seed=9, **kwargs) for r in range(world)]


def test_the_sampler_position_is_the_jobs_and_resumes_at_another_world_size(tmp_path):
    mgr = CheckpointManager(f"file://{tmp_path}")
    four = ranks(4)
    for s in four:
        s.set_epoch(3)
    used = consume(four, 15)  # 4 ranks x 15 = 60 of 100
    assert {s.position for s in four} == {60}  # every rank holds the job's position
    save(mgr, {"sampler": four[0]}, 60)  # saved from one rank

    three = ranks(3)  # the job shrank to 3 ranks
    for s in three:
        assert load(mgr, {"sampler": s}) is not None
    assert three[0].epoch == 3
    rest = [i for s in three for i in s]
    assert sum(len(s) for s in three) == len(rest) == 42  # 40 left, padded to a multiple of 3
    assert sorted(set(used) | set(rest)) == list(range(100)) and not set(used) & set(rest)
    assert sorted(used) == sorted(three[0].order()[:60])  # the ranks used the epoch order's first 60

    grown = ranks(5, drop_last=True)  # grown to 5 ranks, dropping the tail
    for s in grown:
        s.load_state_dict(four[0].state_dict())
    assert sorted(i for s in grown for i in s) == sorted(three[0].order()[60:])  # 40 = 5 x 8, none dropped


def test_the_sampler_refuses_a_position_from_another_dataset():
    saved = ranks(2)[0].state_dict()
    with pytest.raises(ValueError, match="size=100"):
        ElasticSampler(range(50), num_replicas=2, rank=0, seed=9).load_state_dict(saved)
    matches_torch = torch.utils.data.DistributedSampler(range(100), num_replicas=2, rank=1, seed=9)
    assert list(ranks(2)[1]) == list(matches_torch)  # a fresh epoch is DistributedSampler's


def test_the_sampler_in_a_plain_loader_with_two_workers_counts_what_the_loop_used():
    sampler = ElasticSampler(list(range(SIZE)), num_replicas=1, rank=0, seed=5)
    plain = torch.utils.data.DataLoader(list(range(SIZE)), batch_size=BATCH, num_workers=2, sampler=sampler)
    it = iter(plain)
    used = []
    for _ in range(USED):
        used += samples([next(it)])
        sampler.advance(BATCH)
    del it
    assert sampler.position == USED * BATCH  # not what the workers prefetched
    again = ElasticSampler(list(range(SIZE)), num_replicas=1, rank=0, seed=5)
    again.load_state_dict(sampler.state_dict())
    assert used + list(again) == sampler.order()
