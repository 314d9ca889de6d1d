"""The pure planning engine: offers and a spec in, a Plan out, no I/O.

Its face is :func:`plan`. The modules behind it, in the order the data flows:
``candidates`` (offers -> priced pools), ``pruning`` and ``twins`` (fewer, interchangeable
columns), ``milp`` and ``highs`` (the integer program and its solver), ``strategies`` and
``coupled`` (per-workload objectives), ``shortfall`` (what could not be met and why) and
``economics`` (expected true cost of a pool).
"""

__all__ = ["plan"]


def __getattr__(name: str):
    # Lazy, so importing one light module (economics) does not load the solver stack.
    if name == "plan":
        from fleet.planning.planner import plan

        return plan
    raise AttributeError(name)
