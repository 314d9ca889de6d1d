"""`fleet simulate` end to end: a real subprocess of the installed command on traces written to disk."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SPEC = """
name: sim
capacity: {gpus: 2, accelerators: [H100], gpus_per_node: {min: 1, max: 1}}
providers: {gcp: {}}
rebalance: {critical_gpus: 2}
diversification: {max_pool_share: 1}
"""


def fleet(*args: str, home: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "fleet.cli.main", "--home", str(home), *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "COLUMNS": "200"},
    )


def write_traces(tmp_path: Path) -> Path:
    d = tmp_path / "traces"
    d.mkdir()
    # us-central1-a (catalog spot $2.52/h) drops at tick 10; us-west1-a never does
    (d / "a.json").write_text(
        json.dumps({"metadata": {"gap_seconds": 600, "zone": "us-central1-a"}, "data": [1] * 10 + [0] * 10})
    )
    (d / "us-west1-b.json").write_text(json.dumps({"data": [1] * 20}))
    return d


def test_json_report_on_hand_made_traces(tmp_path):
    spec = tmp_path / "fleet.yaml"
    spec.write_text(SPEC)
    traces = write_traces(tmp_path)
    mapping = tmp_path / "map.json"
    mapping.write_text(json.dumps({"us-central1-a": ["gcp/us-central1/us-central1-a/a3-highgpu-1g/spot"]}))
    res = fleet(
        "simulate",
        str(spec),
        "--traces",
        str(traces),
        "--values",
        "one",
        "--tick",
        "10m",
        "--mapping",
        str(mapping),
        "--json",
        home=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["ticks"] == 20 and data["cold_start_ticks"] == 1
    assert set(data["pools"].values()) == {"us-central1-a", "us-west1-b"}
    by = {p["policy"]: p for p in data["policies"]}
    assert set(by) == {
        "ours",
        "all on-demand",
        "single pool + on-demand",
        "cheapest-first spot",
        "even spread",
        "greedy + on-demand bridge",
        "SpotHedge placer",
    }
    assert by["all on-demand"]["at_target"] == 1.0 and by["all on-demand"]["cost_share_of_on_demand"] == 1.0
    assert by["ours"]["interruptions"] >= 1 and by["ours"]["cost_share_of_on_demand"] < 1
    assert data["optimum"]["status"] == "optimal"
    assert all(p["cost_multiple_of_optimum"] >= 1 - 1e-9 for p in data["policies"] if p["at_target"] == 1.0)


def test_table_on_the_shipped_traces_with_no_trace_options(tmp_path):
    spec = tmp_path / "fleet.yaml"
    spec.write_text(SPEC)
    res = fleet("simulate", str(spec), "--days", "0.5", "--no-optimum", home=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "cheapest-first spot" in res.stdout and "12 spot pools" in res.stdout


def test_bad_input_is_one_line_naming_the_option(tmp_path):
    spec = tmp_path / "fleet.yaml"
    spec.write_text(SPEC)
    traces = tmp_path / "t"
    traces.mkdir()
    (traces / "z.json").write_text(json.dumps({"data": [0, 1]}))
    res = fleet("simulate", str(spec), "--traces", str(traces), home=tmp_path)
    assert res.returncode == 1 and "--tick" in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    res = fleet("simulate", str(spec), "--interval", "soon", home=tmp_path)
    assert res.returncode == 1 and "cannot read duration 'soon'" in res.stderr


def test_chart_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    spec = tmp_path / "fleet.yaml"
    spec.write_text(SPEC)
    out = tmp_path / "sim.png"
    res = fleet("simulate", str(spec), "--days", "0.5", "--no-optimum", "--chart", str(out), "--json", home=tmp_path)
    assert res.returncode == 0, res.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000
    assert json.loads(res.stdout)["ticks"] == 72


def test_hazard_rates_replace_the_catalog_estimates_and_pools_report_them(tmp_path):
    spec = tmp_path / "fleet.yaml"
    spec.write_text(SPEC)
    res = fleet("simulate", str(spec), "--days", "1", "--no-optimum", "--rates", "hazard", "--json", home=tmp_path)
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    ours = data["policies"][0]
    assert data["rates"] == "hazard" and ours["pools"]
    for figures in ours["pools"].values():
        assert figures["planned_rate_per_hour"] == figures["hazard_rate_per_hour"]
        assert figures["realised_rate_per_hour"] == pytest.approx(figures["interruptions"] / figures["hours"], rel=1e-3)


def test_at_80_columns_in_a_terminal_every_number_is_whole(tmp_path):
    """In an 80x24 pseudo-terminal the table drops columns rather than cut a figure (``16,88…``)."""
    from cli.terminal import plain, run_in_pty, screen

    spec = tmp_path / "fleet.yaml"
    spec.write_text(SPEC)
    args = ["simulate", str(spec), "--days", "0.5", "--no-optimum"]
    data = json.loads(fleet(*args, "--json", home=tmp_path).stdout)
    code, out = run_in_pty(
        [sys.executable, "-m", "fleet.cli.main", "--home", str(tmp_path), *args], dict(os.environ), cols=80, rows=24
    )
    text = plain(out)
    assert code == 0, text
    assert "tick 72 of 72" in text  # progress, on a status line the table then replaces
    term = screen(out, cols=80, rows=24)
    lines = [line.rstrip() for line in term.display]
    assert max(len(line) for line in lines) <= 80 and "…" not in "\n".join(lines)
    table = lines[lines.index(next(line for line in lines if line.startswith("policy"))) :]
    for p in data["policies"]:
        row = next(line for line in table if line.startswith(p["policy"] + "  "))
        cells = row[len(p["policy"]) :].split()
        assert cells[:3] == [f"{100 * p['at_target']:.2f}%", f"{100 * p['at_critical']:.2f}%", f"{p['cost']:,.2f}"]
    assert "left out for width; --wide shows every column" in text


def test_synthetic_traces_are_seeded_and_as_long_as_the_recorded_ones(tmp_path):
    spec = tmp_path / "fleet.yaml"
    spec.write_text(SPEC)
    args = [
        "simulate",
        str(spec),
        "--traces",
        str(write_traces(tmp_path)),
        "--values",
        "one",
        "--tick",
        "10m",
        "--no-optimum",
        "--json",
    ]
    runs = [json.loads(fleet(*args, "--synthetic", seed, home=tmp_path).stdout) for seed in ("3", "3")]
    assert runs[0]["policies"] == runs[1]["policies"] and runs[0]["ticks"] == 20
