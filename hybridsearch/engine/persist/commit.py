"""GroupCommit: concurrent durable writes share one fsync, and stay invisible until durable.

A write is appended to the log under `writer` (so the log holds writes in one order) without an
fsync, and queued. One of the waiting writers becomes the leader: it takes every write queued
so far, makes them durable with one fsync, applies them in log order under the readers'
exclusive lock, and wakes their writers. Under load n concurrent writers cost one fsync instead
of n; alone, a writer costs what it did (one fsync). A write is applied (visible) only after
its fsync, and its call returns only after that, as before. When the fsync fails, no write of
the group is applied and each of their calls raises.

A write that decides from the data what it changes (a delete or an update by filter) must see
every write logged before it, but RAM lags the log by the writes queued or in a group being
applied. Such a write is submitted with `alone=True`: new writes wait, the ones in flight are
applied, and only then does it read the data and log its decision, under `writer` with nothing
in flight, so the log's order is the order in which the writes saw the data (serializable).
"""
from __future__ import annotations

import threading
from typing import Any, Callable


class _Write:
    __slots__ = ("apply", "done", "result", "error")

    def __init__(self, apply: Callable[[], Any]) -> None:
        self.apply = apply
        self.done = False
        self.result = None
        self.error = None


class GroupCommit:
    """Durable writes of one journal (see the module docstring)."""

    def __init__(self, writer, sync: Callable[[], None], apply_lock, after: Callable[[], None]) -> None:
        self.writer = writer  # the storage's writer lock, held while appending: the log's order
        self._sync = sync  # fsync of everything appended so far
        self._apply_lock = apply_lock  # the readers' lock (RWLock)
        self._after = after  # run under `writer` when no write is queued (the storage's snapshot)
        self._queue: list = []
        self._cv = threading.Condition()
        self._leading = False
        self._alone = 0  # writes waiting to log with nothing in flight: new writes wait for them
        self.fsyncs = 0  # for stats(): fsyncs made by writes

    def submit(self, append: Callable[[], Any], apply: Callable[[], Any], alone: bool = False) -> Any:
        """append() logs the write (no fsync; called under `writer`); apply() changes RAM once it is
        durable. Returns apply()'s result, or raises append's, the fsync's or apply's error.
        alone=True: append() runs only once every write logged before it is applied (it reads
        the data to decide what it writes; see the module docstring)."""
        write = _Write(apply)
        if alone:
            self._append_alone(append, write)
        else:
            with self._cv:  # behind the writes waiting to log alone: they would wait for us forever
                while self._alone:
                    self._cv.wait()
            with self.writer:
                append()
                self._queue.append(write)
        self._until(lambda: write.done)
        if write.error is not None:
            raise write.error
        return write.result

    def _until(self, done: Callable[[], bool]) -> None:
        """Waits while another writer leads a group, and leads groups itself, until done()."""
        while True:
            with self._cv:
                while self._leading and not done():
                    self._cv.wait()
                if done():
                    return
                self._leading = True
            try:
                self._lead()
            finally:
                with self._cv:
                    self._leading = False
                    self._cv.notify_all()

    def _lead(self) -> None:
        with self.writer:
            group, self._queue = self._queue, []
        if not group:
            return
        try:
            self._sync()
            self.fsyncs += 1
        except BaseException as e:  # nothing of the group is applied
            for w in group:
                w.error, w.done = e, True
            return
        with self._apply_lock.write():
            for w in group:
                try:
                    w.result = w.apply()
                except BaseException as e:  # an update whose document a write before it deleted: KeyError
                    w.error = e
                w.done = True
        with self.writer:
            if not self._queue:
                self._after()

    def _append_alone(self, append: Callable[[], Any], write: _Write) -> None:
        with self._cv:
            self._alone += 1
        try:
            while True:
                self.drain()
                with self.writer:
                    # a write may have passed the _alone check just before we raised it
                    if self._queue or self._leading:
                        continue
                    append()
                    self._queue.append(write)
                    return
        finally:
            with self._cv:
                self._alone -= 1
                self._cv.notify_all()

    def drain(self) -> None:
        """Returns once every queued write is applied (or failed); the caller holds no lock."""
        def idle() -> bool:
            with self.writer:
                return not self._queue and not self._leading

        self._until(idle)
