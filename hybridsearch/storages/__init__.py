"""Storages: the registry, the Storage base, and local / wrapped / remote families."""
