"""The embedded local cloud: a simulated multi-provider spot market, no account needed.

``LocalCloud.open(root)`` opens (or creates) a persistent cloud; ``cloud.provider("aws")``
returns a Provider that behaves like that vendor over the trace-driven market.
"""

from providers.local.cloud import LocalCloud
from providers.local.provider import LocalProvider

__all__ = ["LocalCloud", "LocalProvider"]
