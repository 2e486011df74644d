"""Storages on the embedded engine: memory, hnsw, sqlite."""
