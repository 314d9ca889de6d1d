"""`fleet up plan.json` applies a plan saved by `fleet plan SPEC --out plan.json` exactly, and
refuses (nothing launched, one line naming what changed and how to plan again) when the spec
or the offers changed since."""

from __future__ import annotations

import json

from cli.world import SMALL_SPEC as SMALL
from cli.world import World

from fleet.model import Plan


def test_a_saved_plan_is_applied_exactly_and_refused_when_its_spec_or_offers_changed(world: World):
    spec = world.spec("saved", SMALL)
    out = world.root / "plan.json"
    planned = world.fleet("plan", str(spec), "--out", str(out))
    assert planned.returncode == 0, planned.stderr
    saved = json.loads(out.read_text())
    assert saved["spec"]["name"] == "saved" and saved["spec_hash"] and saved["spec_file_hash"] == saved["spec_hash"]
    assert all(a["offer"]["price_per_hour"] > 0 for a in saved["allocations"])

    tampered = world.root / "dearer.json"  # the offers moved since: one pool costs more now
    dearer = json.loads(out.read_text())
    dearer["allocations"][0]["offer"]["price_per_hour"] -= 1.0
    tampered.write_text(json.dumps(dearer))
    refused = world.fleet("up", str(tampered), "--yes")
    [error] = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
    assert refused.returncode == 1 and "is out of date" in error and f"fleet plan {spec} --out {tampered}" in error
    assert world.created("saved") == []

    bare = world.root / "bare.json"  # `fleet plan --json` has no spec: says how to save one
    bare.write_text(world.fleet("plan", str(spec), "--json").stdout)
    refused = world.fleet("up", str(bare), "--yes")
    assert refused.returncode == 1 and "--out" in refused.stderr and world.created("saved") == []

    text = spec.read_text()
    spec.write_text(text.replace("gpus: 16", "gpus: 24"))  # the spec was edited after planning
    refused = world.fleet("up", str(out), "--yes")
    assert refused.returncode == 1 and "changed since" in refused.stderr and world.created("saved") == []
    spec.write_text(text)

    report = world.fleet_json("up", str(out), "--yes")
    assert report["ok"] and report["plan_id"] == saved["id"]
    wanted = {
        Plan.from_json(out.read_text()).allocations[i].offer.pool.id: a["count"]
        for i, a in enumerate(saved["allocations"])
        if a["count"]
    }
    assert world.alive("saved") == wanted
    assert world.fleet_json("status", "saved")["plan_id"] == saved["id"]
