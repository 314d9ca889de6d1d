"""Shell completion of fleet names and instance ids, through click's completion protocol
(`_FLEET_COMPLETE=bash_complete`, as the shell runs it)."""

from __future__ import annotations

from cli.world import SMALL_SPEC as SMALL
from cli.world import World


def _complete(world: World, words: str, *, cword: int | None = None) -> list[str]:
    """What bash completion offers for ``words`` (click's protocol: ``type,value`` lines)."""
    cword = len(words.split()) - (0 if words.endswith(" ") else 1) if cword is None else cword
    proc = world.fleet(env=world.env(_FLEET_COMPLETE="bash_complete", COMP_WORDS=words, COMP_CWORD=str(cword)))
    assert proc.returncode == 0, proc.stderr
    return [line.split(",", 1)[1] for line in proc.stdout.splitlines() if line.startswith("plain,")]


def test_completion_offers_recorded_fleet_names_and_running_instance_ids(world: World):
    assert _complete(world, "fleet status ") == []  # no store yet: nothing, and no error
    for name in ("train-a", "train-b", "serve"):
        assert world.fleet_json("up", str(world.spec(name, SMALL)), "--yes")["ok"]
    world.fleet_json("down", "serve", "--yes")
    assert _complete(world, "fleet status train") == ["train-a", "train-b"]
    assert _complete(world, "fleet down ") == ["serve", "train-a", "train-b"]
    assert _complete(world, "fleet history s") == ["serve"]
    running = sorted(i.id for i in world.cloud.all_instances(alive_only=True))
    assert len(running) == 4 and _complete(world, "fleet local preempt ") == running
    assert _complete(world, f"fleet local preempt {running[0][:-1]}") == [running[0]]
    other = world.root / "other.db"  # --state names another store: none there
    assert _complete(world, f"fleet --state {other} status ") == []
