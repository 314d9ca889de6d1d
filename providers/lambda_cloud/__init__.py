"""The Lambda Cloud adapter: REST over httpx (Lambda publishes no official Python SDK)."""
