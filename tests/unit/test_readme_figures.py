"""The measured figures the docs state (``docs/figures.md``, which the README links to) are the
benchmarks' saved results, and the planner benchmark's are what the planner gives for the shipped
examples today."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fleet.catalog import filter_for_spec, snapshot_offers
from fleet.planning import plan
from fleet.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
#: The page that holds the measured figures (it was the README's "Measured figures" section).
FIGURES = ROOT / "docs" / "figures.md"
RESULTS = json.loads((ROOT / "benchmarks" / "results" / "planner.json").read_text())
ROW = re.compile(
    r"^\| `(?P<spec>[a-z0-9-]+)` \| \$(?P<ours>[\d,.]+)/h \| \$(?P<greedy>[\d,.]+)/h \| "
    r"\$(?P<od>[\d,.]+)/h \((?:we save )?(?P<save>\d+)%\) \|$",
    re.M,
)


def _readme_rows() -> dict[str, dict[str, str]]:
    return {m["spec"]: m.groupdict() for m in ROW.finditer(FIGURES.read_text())}


def _money(text: str) -> float:
    return float(text.replace(",", ""))


QUALITY = {row["spec"]: row for row in RESULTS["quality"]}


def test_every_example_in_the_benchmark_has_its_readme_row():
    assert set(_readme_rows()) == set(QUALITY)


@pytest.mark.parametrize("name", sorted(QUALITY))
def test_readme_row_matches_the_benchmark_result(name):
    row, bench = _readme_rows()[name], QUALITY[name]
    ours = bench["fleets"][f"spotfleet ({bench['plan']['strategy']})"]
    assert _money(row["ours"]) == pytest.approx(ours["true_cost_per_hour"], abs=0.005)
    assert _money(row["greedy"]) == pytest.approx(
        bench["fleets"]["greedy within the spec's caps"]["true_cost_per_hour"], abs=0.005
    )
    assert _money(row["od"]) == pytest.approx(bench["plan"]["on_demand_alternative_per_hour"], abs=0.005)
    assert int(row["save"]) == round(100 * bench["plan"]["savings_fraction"])


@pytest.mark.parametrize("name", sorted(QUALITY))
def test_benchmark_result_is_what_the_planner_gives_now(name):
    spec = load_spec(ROOT / "examples" / f"{name}.yaml")
    bench = QUALITY[name]
    assert spec.strategy.value == bench["plan"]["strategy"]
    totals = plan(spec, filter_for_spec(snapshot_offers(), spec)).totals
    ours = bench["fleets"][f"spotfleet ({spec.strategy.value})"]
    assert round(totals.true_cost_per_hour, 2) == pytest.approx(ours["true_cost_per_hour"], abs=0.005)
    assert totals.on_demand_alternative_per_hour == pytest.approx(bench["plan"]["on_demand_alternative_per_hour"])
    assert totals.savings_fraction == pytest.approx(bench["plan"]["savings_fraction"])


def test_readme_start_up_figures_are_the_benchmark_result():
    startup = json.loads((ROOT / "benchmarks" / "results" / "startup.json").read_text())
    figures = startup["figures"]
    text = " ".join(FIGURES.read_text().split())
    for phrase, key in [
        ("`fleet --help` {} s", "fleet_help_s"),
        ("`python -c pass` {} s", "python_bare_s"),
        ("`fleet status` {} s", "fleet_status_s"),
        ("on the snapshot {} s", "fleet_plan_snapshot_s"),
        ("importing scipy ({} s", "import_scipy_optimize_s"),
        ("import in {} s", "import_highspy_s"),
    ]:
        if figures[key] is None:  # highspy is measured only where it is installed
            continue
        assert phrase.format(f"{figures[key]:.2f}") in text, phrase
    assert f"load average of {startup['load_average_1m']:g} on {startup['cores']} cores" in text


def checkpoint_torch_row(size: str, r: dict) -> str:
    """The figures page's row of the PyTorch checkpoint table for one state size of the benchmark (a part
    the run did not measure shows as "-")."""
    local, mem, dcp, s3, training = (r.get(k) for k in ("local", "memory", "dcp", "s3", "training"))

    def pair(part: dict | None) -> str:
        return f"{part['save_ratio']:.2f} / {part['load_ratio']:.2f}" if part else "-"

    def paired(part: dict | None) -> str:
        """The S3 cell: ratios of the medians, then the median of the rounds' own ratios."""
        if not part:
            return "-"
        return f"{pair(part)} ({part['save_ratio_paired']:.2f} / {part['load_ratio_paired']:.2f})"

    def fits(part: dict | None) -> str:
        return f"{part['capacity']['30s_notice_gb']:g} / {part['capacity']['120s_notice_gb']:g}" if part else "-"

    def blocks(part: dict | None) -> str:
        """The training-shaped process: the median share, the first save's, then with the fold off."""
        if not part:
            return "-"
        return (
            f"{100 * part['async_block_share']:.1f}% ({1000 * part['async_block_s']:.0f} ms); "
            f"first {100 * part['async_block_share_first']:.1f}%; "
            f"fold off {100 * part['unfolded']['async_block_share']:.1f}%"
        )

    return (
        f"| {r['bytes'] / 1e9:.1f} GB | {pair(local)} | {mem['peak_ratio']:.2f} | {pair(dcp)} | {paired(s3)} | "
        f"{blocks(training)} | {fits(local)}; {fits(s3)} |"
    )


def test_readme_pytorch_checkpoint_figures_are_the_benchmark_result():
    bench = json.loads((ROOT / "benchmarks" / "results" / "checkpoint_torch.json").read_text())
    readme = FIGURES.read_text()
    assert bench["results"], "the benchmark recorded no sizes"
    for size, result in bench["results"].items():
        assert checkpoint_torch_row(size, result) in readme, size
