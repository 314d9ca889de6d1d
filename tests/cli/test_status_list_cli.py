"""`fleet status` as a daily driver (issue 26): without a NAME it lists the fleets (-A adds those
down); it exits 0 when it could read, `--check` 3 when short; usage errors exit 64, apart from a
bad spec's 2; `fleet --help` groups the commands."""

from __future__ import annotations

import re

from cli.world import SMALL_SPEC as SMALL
from cli.world import World

from fleet.cli.main import COMMAND_MODULES, command_name


def test_status_without_a_name_lists_the_fleets_and_all_adds_those_down(world: World):
    assert world.fleet("status").returncode == 0  # no store yet: nothing to list, not an error
    for name in ("alpha", "beta"):
        assert world.fleet_json("up", str(world.spec(name, SMALL)), "--yes")["ok"]
    world.fleet_json("down", "beta", "--yes")
    listed = world.fleet_json("status")
    assert [(r["fleet"], r["status"], r["running"], r["planned"], r["gpus"]) for r in listed] == [
        ("alpha", "up", 2, 2, 16)
    ]
    every = {r["fleet"]: r for r in world.fleet_json("status", "-A")}
    assert set(every) == {"alpha", "beta"} and every["beta"]["status"] == "down" and every["beta"]["running"] == 0
    human = world.fleet("status")
    assert human.returncode == 0, human.stderr
    assert re.search(r"^alpha\s+up\s+2\s+2\s+16\s", human.stdout, re.M)
    assert "beta" not in human.stdout and "1 fleet(s) down not shown; -A shows them" in human.stdout
    assert re.search(r"^beta\s+down\s+0\s", world.fleet("status", "--all").stdout, re.M)


def test_status_exits_0_when_read_and_check_exits_3_when_short(world: World):
    for name in ("ok", "hit"):
        assert world.fleet_json("up", str(world.spec(name, SMALL)), "--yes")["ok"]
    victim = next(i for i in world.cloud.all_instances(alive_only=True) if i.fleet == "hit")
    world.cloud.preempt(victim.id)
    short = world.fleet("status", "hit")
    assert short.returncode == 0 and "hit: short, 1 of 2 planned" in short.stdout
    assert world.fleet("status", "hit", "--check").returncode == 3
    assert world.fleet("status", "ok", "--check").returncode == 0
    listed = {r["fleet"]: r["status"] for r in world.fleet_json("status", "--check", ok=(3,))}  # one short: 3
    assert listed == {"ok": "up", "hit": "short"}
    assert world.fleet("status").returncode == 0


def test_usage_errors_exit_64_and_a_bad_spec_still_exits_2(world: World):
    for args in (("status", "--bogus"), ("--bogus",), ("up",), ("local", "preempt"), ("status", "--watch")):
        proc = world.fleet(*args)
        assert proc.returncode == 64, (args, proc.returncode, proc.stderr)
        assert "Usage:" in proc.stderr or "Error:" in proc.stderr
    bad = world.root / "bad.yaml"
    bad.write_text("name: bad\ncapacity: {gpus: -1, accelerators: [H100]}\n")
    assert world.fleet("plan", str(bad)).returncode == 2


def test_help_groups_the_commands_and_lists_each_once(world: World):
    text = world.fleet("--help").stdout
    sections = ["Operate a fleet:", "Plan and price:", "On the node:", "Local cloud:"]
    assert [s for s in sections if s in text] == sections
    assert [text.index(s) for s in sections] == sorted(text.index(s) for s in sections)
    listed = re.findall(r"^  ([a-z]+)\s{2,}\S", text, re.M)
    assert sorted(listed) == sorted(command_name(m) for m in COMMAND_MODULES)  # each once
    assert "Other commands:" not in text  # every command has its section
    operate = text[text.index("Operate a fleet:") : text.index("Plan and price:")]
    assert all(f"  {c} " in operate for c in ("up", "status", "down"))
    assert "  local " in text[text.index("Local cloud:") :]
