"""What a spec's budget holds a fleet's bill to, by default (``budget.cap_action``,
``budget.bill_tolerance``): constants shared by the spec (``fleet.spec.Budget``) and the bill
rule (``fleet.rebalance.bills``), which reads a recorded spec without building it."""

from __future__ import annotations

from typing import Final, Literal

CapAction = Literal["warn", "replace", "destroy"]

#: What happens to an instance billed beyond its budget: warn, replace (make before break), destroy.
CAP_ACTIONS: Final = ("warn", "replace", "destroy")
DEFAULT_CAP_ACTION: Final[CapAction] = "warn"
#: How far above its planned price an instance may bill, as a fraction.
DEFAULT_BILL_TOLERANCE = 0.10
