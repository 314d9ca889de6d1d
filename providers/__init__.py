"""Provider adapters: one per cloud, all speaking the protocol in ``providers.base``."""
