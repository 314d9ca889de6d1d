"""``fleet simulate``: price a spec on recorded spot traces before spending money.

Everything is pure (no clock, no I/O) except ``tracefile.load_traces``, which reads the
trace files, and ``chart``, which writes a PNG. ``tracefile`` parses per-zone traces,
``market`` maps them onto the catalog's pools, ``engine`` replays the market on a virtual
clock through a policy and accounts for it, ``policies`` holds the spec's own rebalancer
(``fleet.rebalance.decide``) and the baselines, ``optimum`` the offline optimum (an integer
program), ``hazard`` fresh-node interruption rates fitted from run lengths, and ``run``
puts them together.
"""

from fleet.simulate.run import Report, SimOptions, simulate

__all__ = ["Report", "SimOptions", "simulate"]
