"""Where a backup or a restore writes: a destination that must not exist yet, filled under a
temporary name beside it and renamed into place once complete and durable.

A copy is built in `.<name>.hsbackup-<pid>-<random>.tmp` in dest's folder (a directory for the
journaled storages, a file for sqlite), fsynced, then renamed to dest and the folder fsynced. So
dest either does not exist or holds a complete copy, whenever the process dies; what a killed
copier leaves is only its temporary, which the next backup or restore into the same folder
removes (once the process that made it is gone).
"""
from __future__ import annotations

import errno
import os
import re
import secrets
import shutil
from typing import Optional

from hybridsearch.engine.files import fsync_dir
from hybridsearch.errors import BackendError, ConfigError

# the temporary, and the files SQLite keeps beside a database it writes
_TEMP = re.compile(r"^\.(?P<name>.+)\.hsbackup-(?P<pid>\d+)-[0-9a-f]+\.tmp(-journal|-wal|-shm)?$")
_SIDECARS = ("-journal", "-wal", "-shm")


def check_dest(dest, what: str = "backup", folder_ok: bool = True) -> str:
    """dest as a str path, refused with ConfigError when it is not a path or already holds
    something (a file, or a directory that is not empty; with folder_ok=False, for a copy that is
    a file, any directory): a copy never overwrites a collection."""
    if not isinstance(dest, (str, os.PathLike)):
        raise ConfigError(f"the {what} destination must be a path (str or os.PathLike), got {type(dest).__name__}")
    dest = os.fspath(dest)
    if not isinstance(dest, str) or "\x00" in dest:  # bytes, or a name no file system takes
        raise ConfigError(f"the {what} destination must be a str path without NUL characters, got {dest!r}")
    dest = os.path.abspath(dest)
    if os.path.lexists(dest):
        if not folder_ok or not os.path.isdir(dest) or os.path.islink(dest):
            raise ConfigError(f"{dest} already exists: the {what} goes to a path that does not exist yet"
                              f"{' (or an empty folder)' if folder_ok else ''}; nothing was written")
        try:
            holds = os.listdir(dest)
        except OSError as e:
            raise ConfigError(f"{dest} cannot be read ({e}): the {what} needs a new path") from None
        if holds:
            raise ConfigError(f"{dest} already exists and is not empty: the {what} goes to a path that does "
                              "not exist yet (or an empty folder), it never overwrites; nothing was written")
    return dest


def temp_beside(dest: str) -> str:
    """A fresh temporary name in dest's folder (created if missing), after removing the
    temporaries that dead copiers left there."""
    folder, name = os.path.split(dest)
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as e:
        raise BackendError(f"{folder}: cannot create the folder of the copy: {e}") from None
    remove_stale(folder)
    return os.path.join(folder, f".{name}.hsbackup-{os.getpid()}-{secrets.token_hex(4)}.tmp")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    return True


def remove_stale(folder: str) -> list:
    """Removes the temporaries in `folder` of copies whose process is gone; -> the paths removed."""
    removed = []
    try:
        entries = os.listdir(folder)
    except OSError:
        return removed
    for entry in entries:
        m = _TEMP.match(entry)
        if m is None or _alive(int(m["pid"])):
            continue
        path = os.path.join(folder, entry)
        try:
            shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.remove(path)
            removed.append(path)
        except OSError:
            pass  # the next copy tries again
    return removed


def discard(tmp: Optional[str]) -> None:
    """Removes a temporary after a failed copy (best effort: a later copy removes what is left)."""
    if tmp is None:
        return
    for path in (tmp, *(tmp + s for s in _SIDECARS)):
        if not os.path.lexists(path):
            continue
        try:
            shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.remove(path)
        except OSError:
            pass


def publish(tmp: str, dest: str, what: str = "backup") -> None:
    """Moves the complete, fsynced temporary to dest and fsyncs the folder. A dest that appeared
    meanwhile is never replaced (ConfigError), except an empty folder, which rename replaces."""
    try:
        if os.path.isdir(tmp):
            os.rename(tmp, dest)  # over an empty folder only: ENOTEMPTY otherwise
        else:
            os.link(tmp, dest)  # unlike rename, refuses a dest that exists (EEXIST)
            os.remove(tmp)
    except OSError as e:
        if e.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
            raise ConfigError(f"{dest} appeared during the {what}: nothing was overwritten") from None
        raise BackendError(f"{dest}: cannot move the finished {what} into place: {e}") from None
    try:
        fsync_dir(os.path.dirname(dest))
    except OSError as e:
        raise BackendError(f"{os.path.dirname(dest)}: cannot sync the folder after the {what}: {e}") from None


def fsync_file(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
