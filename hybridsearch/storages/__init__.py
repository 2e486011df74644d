"""Storages: the registry, the Storage base, and the local / wrapped / remote families.

`hs.storages()` (API.md) lists the storages usable in this install. It is this package,
called: the package module is made callable below, so the public function and the
subpackage are one object and neither hides the other (`import hybridsearch.storages.local.hnsw`
and `hs.storages()` both work).
"""
import sys
import types


class _CallableModule(types.ModuleType):
    def __call__(self) -> list:
        """Names of the storages usable in this install."""
        from hybridsearch.storages.registry import available
        return available()


sys.modules[__name__].__class__ = _CallableModule
