"""The opscope version, in a module of its own so that any layer can read it without importing
the top package (the ingest cache keys its entries with it)."""

__version__ = "0.1.0"
