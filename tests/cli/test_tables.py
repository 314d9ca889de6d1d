"""Every table the CLI prints, rendered by the real ``fleet`` command at 80 and 120 columns:
no line is wider than the terminal, no word is broken inside a cell, and the part of a pool id
that tells two rows apart is always shown whole."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli.world import World

from fleet.cli.tables import Column, compact_pool, layout

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = (ROOT / "examples" / "quickstart.yaml").read_text()


def test_compact_pool_ids_drop_only_what_the_zone_already_says():
    assert compact_pool("gcp/us-east4/us-east4-c/a3-highgpu-1g/spot") == "gcp/us-east4-c/a3-highgpu-1g"
    assert compact_pool("aws/us-east-1/use1-az4/p5.48xlarge/on-demand") == "aws/use1-az4/p5.48xlarge"
    assert compact_pool("azure/eastus/-/Standard_ND96isr_H100_v5/spot") == "azure/eastus/Standard_ND96isr_H100_v5"
    assert compact_pool("runpod/CA/CA-MTL-1/8x_H100_SECURE/on-demand") == "runpod/CA-MTL-1/8x_H100_SECURE"
    assert compact_pool("oddcloud/r1/z9/t/spot") == "oddcloud/r1/z9/t"
    assert compact_pool("not-a-pool") == "not-a-pool"


def test_every_snapshot_pool_keeps_a_distinct_compact_id():
    from fleet.catalog import snapshot_offers

    ids = {o.pool.id.rsplit("/", 1)[0] for o in snapshot_offers()}
    assert len({compact_pool(i + "/spot") for i in ids}) == len(ids)


def test_layout_drops_optional_columns_highest_first_and_never_the_required_ones():
    columns = [Column("pool"), Column("node", drop=1), Column("extra", drop=2), Column("wide", wide=True)]
    rows = [["x" * 30, "y" * 20, "z" * 20, "w"]]
    assert layout(columns, rows, 120, wide=False) == ([0, 1, 2], [])
    assert layout(columns, rows, 60, wide=False) == ([0, 1], ["extra"])
    assert layout(columns, rows, 40, wide=False) == ([0], ["extra", "node"])
    assert layout(columns, rows, 10, wide=False) == ([0], ["extra", "node"])  # runs past, never cut
    assert layout(columns, rows, 40, wide=True) == ([0, 1, 2, 3], [])


@pytest.fixture
def fleet_world(tmp_path: Path) -> World:
    world = World(tmp_path)
    world.spec("quickstart", QUICKSTART.replace("{", "{{").replace("}", "}}"))
    return world


def _run(world: World, width: int, *args: str, ok: tuple[int, ...] = (0,)) -> str:
    env = world.env()
    env["COLUMNS"] = str(width)
    proc = world.fleet(*args, env=env)
    assert proc.returncode in ok, f"fleet {' '.join(args)} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def _check(out: str, width: int, whole: list[str]) -> None:
    lines = out.splitlines()
    too_wide = [line for line in lines if len(line) > width]
    assert not too_wide, too_wide
    for text in whole:
        assert any(text in line for line in lines), f"{text!r} is not shown whole:\n{out}"


@pytest.mark.parametrize("width", [80, 120])
def test_tables_fit_the_terminal_and_keep_names_whole(fleet_world: World, width: int):
    world = fleet_world
    spec = str(world.root / "quickstart.yaml")
    planned = world.fleet_json("plan", spec)
    pools = [a["offer"]["pool"] for a in planned["allocations"]]
    ids = ["/".join([p["provider"], p["region"], p["zone"] or "-", p["instance_type"], p["market"]]) for p in pools]
    shown = [compact_pool(i) for i in ids]
    assert len(set(shown)) == len(shown) > 1
    headers = ["pool", "market", "$/h"]

    _check(_run(world, width, "plan", spec), width, shown + headers + ["count", "int/h"])
    _check(_run(world, width, "up", spec, "--yes"), width, shown + ["now", "plan", "change", "launch"])
    _check(_run(world, width, "plan", spec), width, shown + ["keep", "change: keep"])
    status = _run(world, width, "status", "quickstart")
    _check(status, width, shown + ["run", "plan", "preempted", "quickstart: up"])
    ids_running = [i.id for i in world.cloud.all_instances(alive_only=True)]
    _check(status, width, ids_running)
    _check(_run(world, width, "history", "quickstart"), width, ids_running + ["time (UTC)", "launched"])
    _check(_run(world, width, "list"), width, ["quickstart", "instances", "GPUs", "updated"])
    offers = _run(world, width, "offers", "--accelerator", "H100", "--limit", "40")
    _check(offers, width, ["$/GPU-h", "on-demand", "spot"])
    gcp_rows = [line.split()[0] for line in offers.splitlines() if line.startswith("gcp/")]
    assert gcp_rows and all(row.count("/") == 2 for row in gcp_rows)  # whole compact ids


def test_wide_shows_full_pool_ids_and_every_column(fleet_world: World):
    world = fleet_world
    spec = str(world.root / "quickstart.yaml")
    world.fleet_json("up", spec, "--yes")
    full = sorted(world.alive("quickstart"))
    narrow = _run(world, 80, "status", "quickstart")
    assert "--wide shows every column" in narrow and not any(pool in narrow for pool in full)
    wide = _run(world, 80, "status", "quickstart", "--wide")
    assert all(pool in wide for pool in full) and "--wide shows" not in wide
    plan = _run(world, 80, "plan", spec, "--wide")
    assert "$/GPU-h" in plan and "int/h from" in plan and all(pool in plan for pool in full)
