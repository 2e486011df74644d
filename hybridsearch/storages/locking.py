"""One fair reader/writer section per storage whose engine composes several calls per method.

A storage that answers one public method with several engine calls (read the documents a
write replaces, then write; search, then read the hits) needs them to see one state, and its
writers one at a time. `reads` / `writes` decorate its methods: readers share the section, a
writer holds it alone, and the lock is phase-fair (engine/rwlock.py): a stream of writes
cannot starve readers, nor a stream of reads a writer. A method called from another one of the
same storage in the same thread runs inside the section already held (a read inside a write is
fine; a write inside a read is a bug and raises RuntimeError rather than deadlock).

The storage gives `self.calls = Section()` and may define `usable()`, run first in every
decorated method: it raises the typed error of a storage that can no longer answer (closed).
"""
from __future__ import annotations

import functools
import threading

from hybridsearch.engine.rwlock import RWLock


class Section:
    """An RWLock re-entered by the thread holding it (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = RWLock()
        self._held = threading.local()  # .mode: None, "read" or "write"; .depth

    def enter(self, write: bool):
        mode = getattr(self._held, "mode", None)
        if mode is not None:
            if write and mode == "read":
                raise RuntimeError("a write called inside a read of the same storage")
            self._held.depth += 1
            return None
        guard = self._lock.write() if write else self._lock.read()
        guard.__enter__()
        self._held.mode, self._held.depth = ("write" if write else "read"), 1
        return guard

    def held_here(self) -> bool:
        """Whether this thread is inside the section (a read or a write)."""
        return getattr(self._held, "mode", None) is not None

    def leave(self, guard) -> None:
        self._held.depth -= 1
        if not self._held.depth:
            self._held.mode = None
            guard.__exit__(None, None, None)


def held(method, write: bool):
    """`method` run inside its storage's section (`self.calls`), without the `usable()` check:
    for wrapping every call of a family of storages (storages/remote/base.py)."""
    @functools.wraps(method)
    def run(self, *args, **kwargs):
        guard = self.calls.enter(write)
        try:
            return method(self, *args, **kwargs)
        finally:
            self.calls.leave(guard)
    return run


def sections_inside(method):
    """Marks a method that enters its storage's section itself, in parts (qdrant's vector finds
    run the optimizer, a write, before their read): `held`'s wrapping of a family of storages
    leaves it alone, since wrapping it whole as a read would make that write raise."""
    method.sections_inside = True
    return method


def _section(write: bool):
    def decorate(method):
        @functools.wraps(method)
        def run(self, *args, **kwargs):
            guard = self.calls.enter(write)
            try:
                usable = getattr(self, "usable", None)
                if usable is not None:
                    usable()
                return method(self, *args, **kwargs)
            finally:
                self.calls.leave(guard)
        return run
    return decorate


reads = _section(False)
writes = _section(True)
