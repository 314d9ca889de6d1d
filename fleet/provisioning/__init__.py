"""The only code that changes clouds: apply a Plan (executor), launch with idempotency
tokens (launching), converge records with what providers report (reconcile), and account
for what the fleet cost (accounting)."""
