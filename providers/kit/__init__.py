"""The adapter kit: what every provider adapter shares instead of writing it again.

Each module here has one job that every ``providers/<name>/`` package needs (reading vendor
responses into schemas, making provider text safe to print and store, ...); adapters import
from here and from ``fleet`` (the ground layer) only, never from ``fleet.provisioning`` or
``fleet.agent``.
"""
