"""Storages: the registry, the Storage base, and the local / wrapped / remote families.

`hs.storages()` (API.md) lists the storages usable in this install. It is this package,
called: the package module is made callable below, so the public function and the
subpackage are one object and neither hides the other (`import hybridsearch.storages.local.hnsw`
and `hs.storages()` both work).

Why not a function `storages` in hybridsearch/__init__.py: the import system sets the package
attribute only when the subpackage is first loaded, so the function would win, but then
`import hybridsearch.storages.local.hnsw as h` and `hybridsearch.storages.local` fail (both walk
attributes from `hybridsearch`). Setting a module's `__class__` to a ModuleType subclass is the
data model's documented way to customise a module (tests/engine/test_storages_name.py).
"""
import sys
import types


class _CallableModule(types.ModuleType):
    def __call__(self) -> list:
        """Names of the storages usable in this install."""
        from hybridsearch.storages.registry import available
        return available()


sys.modules[__name__].__class__ = _CallableModule
