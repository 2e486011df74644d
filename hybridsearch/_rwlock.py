"""A writer-preferring reader-writer lock: many concurrent searches, one writer."""
import threading


class _Guard:
    """Context manager of one side of the lock (a plain class: cheaper than a generator)."""

    __slots__ = ("_acquire", "_release")

    def __init__(self, acquire, release) -> None:
        self._acquire = acquire
        self._release = release

    def __enter__(self) -> None:
        self._acquire()

    def __exit__(self, *exc) -> None:
        self._release()


class RWLock:
    """Readers share the lock; a writer waits for them and blocks new readers."""

    def __init__(self) -> None:
        # readers take only the plain lock (a C-level context manager); the condition
        # over it is waited on and notified only when a writer is involved
        self._mutex = threading.Lock()
        self._cond = threading.Condition(self._mutex)
        self._readers = 0
        self._writer = False
        self._waiting_writers = 0
        self._read = _Guard(self._acquire_read, self._release_read)
        self._write = _Guard(self._acquire_write, self._release_write)

    def read(self) -> _Guard:
        """`with lock.read():` shares the lock with other readers."""
        return self._read

    def write(self) -> _Guard:
        """`with lock.write():` holds the lock alone."""
        return self._write

    def _acquire_read(self) -> None:
        with self._mutex:
            while self._writer or self._waiting_writers:
                self._cond.wait()
            self._readers += 1

    def _release_read(self) -> None:
        with self._mutex:
            self._readers -= 1
            if not self._readers and self._waiting_writers:
                self._cond.notify_all()

    def _acquire_write(self) -> None:
        with self._mutex:
            self._waiting_writers += 1
            while self._writer or self._readers:
                self._cond.wait()
            self._waiting_writers -= 1
            self._writer = True

    def _release_write(self) -> None:
        with self._mutex:
            self._writer = False
            self._cond.notify_all()
