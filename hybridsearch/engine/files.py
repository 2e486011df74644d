"""Files the embedded storages can trust: one writer per collection (an exclusive BSD lock,
flock, on a lock file), durable replacement (write, fsync, rename, fsync the folder).

flock belongs to the open file description, not to the process (as POSIX record locks
do), so a second opener in the same process is refused exactly like one in another
process, and closing some other descriptor of the file never drops the lock.
"""
from __future__ import annotations

import errno
import os
import time
from typing import Optional

from hybridsearch.errors import BackendError

try:  # absent on Windows, where the lock is skipped
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None


def lock_exclusive(lock_path: str, what: str, timeout: Optional[float] = None) -> Optional[int]:
    """Opens (creating) `lock_path` and locks it; returns the descriptor that holds the lock.

    While another DocumentArray, in this or another process, holds it, waits up to `timeout`
    seconds for it to be released (closed, dropped, or its process dead: the kernel releases a
    dead process's flock), then raises BackendError naming the path, the holder's pid when the
    system tells it, and the timeout. 0 does not wait; None neither, for a storage without the
    lock_timeout option (the error does not suggest it)."""
    if fcntl is None:  # pragma: no cover
        return None
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as e:
        raise BackendError(f"{lock_path}: cannot open the lock file: {e}") from None
    deadline = time.monotonic() + (timeout or 0)
    pause = 0.002
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except OSError as e:
            if e.errno not in (errno.EACCES, errno.EAGAIN, errno.EWOULDBLOCK):
                os.close(fd)
                raise BackendError(f"{lock_path}: cannot lock: {e}") from None
        left = deadline - time.monotonic()
        if left <= 0:
            break
        # polled, not a blocking flock: a blocking call cannot be given a deadline
        time.sleep(min(pause, left))
        pause = min(pause * 2, 0.05)
    holder = lock_holder(fd)
    os.close(fd)
    by = f" by process {holder}" if holder is not None else ""
    if timeout:
        raise BackendError(f"{what} is still open for writing{by} after waiting lock_timeout={timeout:g} s; "
                           f"close the other DocumentArray, or give a longer lock_timeout (lock: {lock_path})")
    wait = "" if timeout is None else ", or open with lock_timeout= seconds to wait for it"
    raise BackendError(f"{what} is already open for writing (in this or another process){by}; "
                       f"close the other DocumentArray first{wait} (lock: {lock_path})")


def lock_holder(fd: int) -> Optional[int]:
    """The pid holding a flock on the file of `fd`, from /proc/locks (Linux); None when unknown."""
    try:
        st = os.fstat(fd)
        with open("/proc/locks") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    ident = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    for line in lines:
        parts = line.split()
        # "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF" ("->" marks a waiter: skipped)
        if len(parts) >= 6 and parts[1] == "FLOCK" and parts[5] == ident and parts[4].isdigit():
            return int(parts[4])
    return None


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
