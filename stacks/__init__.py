"""Pulumi stacks: the same Plan declared as infrastructure (kept apart from the core so the
Pulumi provider SDKs stay an optional extra)."""
