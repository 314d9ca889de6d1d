"""`fleet status --watch` in an 80x24 pseudo-terminal on a fleet taller than the screen: every
refresh redraws in place (the scrollback does not grow), the headline and pools stay on
screen, the instance list is cut to the rows left with "N more"; ages are labelled as the
local cloud's simulated clock."""

from __future__ import annotations

from cli.terminal import plain, run_in_pty, screen
from cli.world import FLEET_BIN, World

TALL = """
name: {name}
backend: local
capacity:
  gpus: 40
  accelerators: [H100]
  gpus_per_node: {{min: 1, max: 1}}
diversification:
  min_pools: 4
  max_pool_share: 0.25
"""


def test_watch_redraws_in_place_with_the_summary_and_pools_on_screen(world: World):
    up = world.fleet_json("up", str(world.spec("tall", TALL)), "--yes")
    assert up["ok"]
    running = len(world.created("tall"))
    assert running > 24  # taller than the terminal
    code, out = run_in_pty(
        [FLEET_BIN, "status", "tall", "--watch", "--times", "3", "--interval", "0.2"], world.env(), cols=80, rows=24
    )
    assert code == 0, plain(out)
    assert plain(out).count("fleet tall: up") == 3  # three frames were drawn
    term = screen(out, cols=80, rows=24)
    assert len(term.history.top) == 0  # ... over each other: no scrollback
    lines = [line.rstrip() for line in term.display]
    assert lines[0].startswith("fleet tall: up, 40 of 40 planned instances running")
    assert "cost so far" in "\n".join(lines) and "pools" in lines
    assert any(line.startswith("instances (ages on the local cloud's simulated clock)") for line in lines)
    header = next(line for line in lines if line.startswith("id "))
    assert header.endswith("sim age")
    more = next(i for i, line in enumerate(lines) if "more instances" in line)
    rows = [line for line in lines[lines.index(header) + 1 : more] if "left out for width" not in line]
    assert rows and all(line.split()[-1].endswith("s") for line in rows)  # instance rows, ending in an age
    assert lines[more].startswith(f"{running - len(rows)} more instances")
    assert max(len(line) for line in lines) <= 80


def test_watch_to_a_pipe_prints_whole_frames(world: World):
    assert world.fleet_json("up", str(world.spec("piped", TALL)), "--yes")["ok"]
    proc = world.fleet("status", "piped", "--watch", "--times", "2", "--interval", "0.2", "--limit", "0")
    assert proc.returncode == 0 and proc.stdout.count("fleet piped: up") == 2
    assert "more instances" not in proc.stdout  # --limit 0 lists all of them, twice
