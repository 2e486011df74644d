"""A phase-fair reader-writer lock: many concurrent searches, one writer.

A waiting writer blocks new readers (writers are not starved by a stream of searches), and a
leaving writer first lets in the readers that were waiting for it (readers are not starved by
a stream of writes, as they are under a writer-preferring lock with writers back to back).

The lock is native (kernels/hs_rwlock.c) because a find's whole Python budget is a few
microseconds: a reader that can enter does so in ~50 ns with the GIL held; whatever waits
releases the GIL first. A thread must not take the read lock again while it holds it (a waiting
writer would block the second read, and the first would never end).
`lock.read()` / `lock.write()` are context managers; `lock.generation` is bumped by every
writer, so a reader may keep what it derived from the data (a filter's bitset) for as long as
the generation it read under is current."""
from hybridsearch._native._kernels import RWLock

__all__ = ["RWLock"]
