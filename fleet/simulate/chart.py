"""``fleet simulate --chart out.png``: capacity by market and cost over time (matplotlib, optional).

Three panels over the replay's hours: ready weighted GPUs of every policy against the target;
our fleet's alive weighted GPUs by market (spot, on-demand); cumulative cost of every policy,
with the offline optimum's total. Needs ``pip install 'spotfleet[chart]'``.
"""

from __future__ import annotations

from pathlib import Path

from fleet.errors import FleetError
from fleet.simulate.run import Report


def draw(report: Report, path: Path) -> None:
    """Write the chart of ``report`` (run with ``SimOptions(series=True)``) to ``path`` as PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    hours = [t * report.replay.tick_seconds / 3600 for t in range(report.replay.ticks)]
    fig, (ready, market, cost) = plt.subplots(3, 1, figsize=(11, 9), sharex=True)
    for o in report.outcomes:
        ready.step(hours, o.ready_series, where="post", label=o.policy, linewidth=1)
        cost.plot(hours, o.cost_series, label=o.policy, linewidth=1)
    ours = report.outcomes[0]
    market.stackplot(hours, ours.spot_series, ours.on_demand_series, labels=["spot", "on-demand"], step="post")
    if report.optimum is not None and report.optimum.cost is not None:
        cost.axhline(report.optimum.cost, color="black", linestyle=":", label="offline optimum (total)")
    ready.set_ylabel("ready weighted GPUs")
    market.set_ylabel(f"{ours.policy}: alive by market")
    cost.set_ylabel("cumulative cost (USD)")
    cost.set_xlabel("hours")
    for ax in (ready, market, cost):
        ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    try:
        fig.savefig(path, format="png", dpi=110)
    except OSError as err:
        raise FleetError(f"--chart {path}: cannot write it ({err.strerror or err})") from None
    finally:
        plt.close(fig)
