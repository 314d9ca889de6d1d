"""spotfleet: plan, provision and keep alive diversified spot GPU fleets."""

__version__ = "0.1.0"
