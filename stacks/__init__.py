"""Pulumi stacks: the fleet a plan describes, declared as infrastructure-as-code.

``stacks.fleet.SpotFleet`` is a ComponentResource made from a :class:`fleet.spec.FleetSpec` and a
:class:`fleet.model.Plan` computed before the program runs (``fleet plan --out plan.json``), so
``pulumi preview`` shows exactly that plan and nothing is priced while Pulumi runs. It composes one
component per provider (``stacks.aws``, ``stacks.gcp``, ``stacks.azure``, ``stacks.vast``). Every
node gets the start-up script ``fleet up`` gives (:mod:`fleet.bootstrap`) and the fleet tags.

``stacks.layout`` (what to declare) and ``stacks.ownership`` (who owns which property) are pure
and import no Pulumi; the rest needs the ``spotfleet[pulumi]`` extra.
"""
