"""Reference studies run by ``opscope demo`` (the RMSNorm study)."""
