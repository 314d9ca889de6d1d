"""Keeping a fleet at target without a human: ``fleet rebalance``.

The pure core is :func:`decide` (``fleet.rebalance.decide``): explicit inputs (spec, offers,
observed instances, recent pool events, the time, the policy state) in, a ``Decision``
(actions) out, no I/O, so a trace simulator can drive it on a virtual clock. The I/O side is
``fleet.rebalance.apply_pass.run_pass``: observe the providers and the store, decide, apply
the actions through the executor and record each one. ``learning`` (Gamma-Poisson update of
interruption rates), ``backoff`` (pools to avoid for a while) and ``bidding`` (Vast outbids)
are the pure rules ``decide`` composes.
"""

from fleet.rebalance.types import (
    Action,
    Decision,
    Exposure,
    Launch,
    ObservedInstance,
    PolicyState,
    PoolEvent,
    RaiseBid,
    Terminate,
)

__all__ = [
    "decide",
    "Action",
    "Decision",
    "Exposure",
    "Launch",
    "ObservedInstance",
    "PolicyState",
    "PoolEvent",
    "RaiseBid",
    "Terminate",
]


def __getattr__(name: str):
    # Lazy, so the action types load without the solver stack.
    if name == "decide":
        from fleet.rebalance.decision import decide

        return decide
    raise AttributeError(name)
