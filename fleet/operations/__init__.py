"""The use cases: what `fleet plan`, `up`, `down`, `rebalance` and `status` do, once, for every face.

Faces (``fleet/cli``, ``stacks/``, the dashboard, the rebalance loop) parse, confirm and render; the modules here decide nothing themselves (``fleet.planning`` and
``fleet.rebalance.decision`` do) and do through ``fleet.provisioning``. One small module per
use case:

- ``workspace``: where the state store and the local cloud are (``Workspace``), opening the
  store, a recorded fleet's spec and providers, the fleet's lock;
- ``offers``: ``offers_for(spec)``, what the planner sees (live, cached, snapshot fallback,
  learned interruption rates, blocked pools);
- ``plan``: ``plan_fleet`` (``fleet plan``), ``fresh_plan`` (``fleet export pulumi``),
  ``changes`` (a plan against what runs);
- ``saved_plan``: a plan saved with its spec (``fleet plan --out``, ``fleet up PLAN``);
- ``up``: ``prepare_up`` returns the plan (holding the fleet's lock), the face confirms,
  ``UpPlan.apply`` launches;
- ``down``: ``prepare_down`` finds what runs, the face confirms, ``DownPlan.apply`` terminates;
- ``rebalance_pass``: one pass of ``fleet.rebalance.cycle`` on a recorded fleet (the face runs the loop);
- ``repair``: rebuild a fleet's record from the providers' tags;
- ``look``: one reconciled look at a recorded fleet (``fleet status``, ``history``, the dashboard).

Inputs are typed (the spec, the providers, the state store, a clock, a progress sink); outputs are
values; errors are ``fleet.errors`` classes. Nothing here imports click or rich (a test checks).
"""
