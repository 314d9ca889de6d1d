"""``fleet simulate``: price a spec on recorded spot traces before spending money (pure core).

``tracefile`` reads per-zone traces, ``market`` maps them onto the catalog's pools,
``engine`` replays the market on a virtual clock through a policy and accounts for it,
``policies`` holds the spec's own rebalancer (``fleet.rebalance.decide``) and the baselines,
``optimum`` the offline optimum (an integer program) and ``run`` puts them together.
"""

from fleet.simulate.run import Report, SimOptions, simulate

__all__ = ["Report", "SimOptions", "simulate"]
