"""One writer per collection file: an exclusive BSD lock (flock) on a lock file.

flock belongs to the open file description, not to the process (as POSIX record locks
do), so a second opener in the same process is refused exactly like one in another
process, and closing some other descriptor of the file never drops the lock.
"""
from __future__ import annotations

import errno
import os
from typing import Optional

from ..errors import BackendError

try:  # absent on Windows, where the lock is skipped
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None


def lock_exclusive(lock_path: str, what: str) -> Optional[int]:
    """Opens (creating) `lock_path` and locks it; returns the descriptor that holds the lock.

    BackendError when another DocumentArray, in this or another process, holds it."""
    if fcntl is None:  # pragma: no cover
        return None
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as e:
        raise BackendError(f"{lock_path}: cannot open the lock file: {e}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        os.close(fd)
        if e.errno in (errno.EACCES, errno.EAGAIN, errno.EWOULDBLOCK):
            raise BackendError(f"{what} is already open for writing (in this or another process); "
                               f"close the other DocumentArray first (lock: {lock_path})") from None
        raise BackendError(f"{lock_path}: cannot lock: {e}") from None
    return fd


def unlock(fd: Optional[int]) -> None:
    """Releases a lock taken by lock_exclusive (closing its descriptor)."""
    if fd is not None:
        os.close(fd)
