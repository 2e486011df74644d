"""Storages over embedded third-party libraries: hnswlib, annlite."""
