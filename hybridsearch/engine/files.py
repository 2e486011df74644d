"""Files the embedded storages can trust: one writer per collection (an exclusive BSD lock,
flock, on a lock file), durable replacement (write, fsync, rename, fsync the folder).

flock belongs to the open file description, not to the process (as POSIX record locks
do), so a second opener in the same process is refused exactly like one in another
process, and closing some other descriptor of the file never drops the lock.
"""
from __future__ import annotations

import errno
import os
from typing import Optional

from hybridsearch.errors import BackendError

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


def fsync_dir(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError as e:
        if e.errno != errno.EINVAL:  # EINVAL: this filesystem cannot sync directories
            raise
    finally:
        os.close(fd)


def pwrite_all(fd: int, data, offset: int) -> None:
    view = memoryview(data)
    while view:
        k = os.pwrite(fd, view, offset)
        if k <= 0:  # pragma: no cover
            raise OSError("short write")
        view = view[k:]
        offset += k


def replace_file(path: str, chunks) -> int:
    """Writes the chunks (bytes) to path.tmp, fsyncs it and renames it over path -> bytes written.
    On any failure the .tmp is removed and path is as it was. The caller syncs the folder."""
    tmp = path + ".tmp"
    size = 0
    try:
        with open(tmp, "wb") as f:
            for chunk in chunks:
                f.write(chunk)
                size += len(chunk)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise
    return size


def write_durably(path: str, data: bytes) -> None:
    """replace_file(path, [data]), then the folder fsynced: the new content survives a crash."""
    replace_file(path, [data])
    fsync_dir(os.path.dirname(path) or ".")


def read_if_present(path: str, what: str) -> Optional[bytes]:
    """The bytes of a small record file, None when there is none; BackendError naming the file
    (and `what` it holds) when it is there but cannot be read."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise BackendError(f"{path}: cannot read {what}: {e}") from None
