"""Reports an interruption to the fleet's state store so the rebalancer learns from it.

The one seam between the node agent and ``fleet.state``: :func:`report_notice` records an
``interruption-notice`` event for the fleet and instance. It never raises: the node is going
away and a store that cannot be reached must not stop the agent from exiting cleanly; it
returns whether the record was written (and logs why not).
"""

from __future__ import annotations

import logging
from typing import Any

from fleet.agent.notice import Notice

log = logging.getLogger("fleet.agent")

EVENT_KIND = "interruption-notice"


def report_notice(
    state_url: str, fleet: str, instance_id: str, notice: Notice, outcome: dict[str, Any] | None = None
) -> bool:
    """Record the notice (and what the agent did about it) in the store at ``state_url``."""
    if not fleet:
        log.warning("not reporting the notice: no --fleet name given")
        return False
    try:
        from fleet.state import open_store

        store = open_store(state_url)
        try:
            store.record_event(
                fleet,
                EVENT_KIND,
                instance_id=instance_id,
                detail={**notice.to_json(), **(outcome or {})},
                ts=notice.received_at,
            )
        finally:
            close = getattr(store, "close", None)
            if close is not None:
                close()
    except Exception as err:  # a lost report must never keep the node from shutting down cleanly
        log.warning("could not report the notice to %s: %s", state_url, err)
        return False
    return True
