"""engine/persist/backup.py below the API: a snapshot the writer takes between the moment a
backup pins the journal and the moment it copies the files removes those files, and the copy
must still be the pinned state (the descriptors pin holds keep the bytes readable). The public
API cannot place a snapshot in that window, hence the storage's internals here.
"""
from __future__ import annotations

import os
from typing import Optional

import numpy as np
import pytest

import hybridsearch as hs
from hybridsearch.engine.persist import backup as B


class Doc(hs.Document):
    title: hs.Text = ""
    embedding: Optional[hs.Vector[4]] = None


def docs(start: int, n: int) -> list:
    rng = np.random.default_rng(start)
    return [Doc(id=f"d{i}", title=f"t{i}", embedding=rng.standard_normal(4).astype(np.float32))
            for i in range(start, start + n)]


@pytest.mark.parametrize("kind", ["memory", "hnsw"])
def test_a_snapshot_after_pin_removes_the_files_and_the_copy_is_still_the_pinned_state(kind, tmp_path):
    src = tmp_path / "src"
    with hs.DocumentArray(Doc, storage=kind, path=src) as da:
        da.extend(docs(0, 50))
    da = hs.DocumentArray(Doc, storage=kind, path=src)  # generation 1: a snapshot and an empty log
    da.extend(docs(50, 30))  # logged
    storage = da._storage
    with storage.writer:
        pinned = B.pin(storage.journal)
    expected = {d.id: d.title for d in da}
    old = sorted(os.listdir(src))
    da.extend(docs(80, 20))
    da.delete(["d0", "d60"])
    with storage.writer, storage.lock.write():
        storage._snapshot()  # the next generation: the pinned files are removed
    assert not set(old) & {n for n in os.listdir(src) if n.startswith(("snap-", "log-"))}
    try:
        B.write_copy(pinned, str(tmp_path / "copy"))
    finally:
        pinned.close()
    with hs.DocumentArray(Doc, storage=kind, path=tmp_path / "copy") as copy:
        assert {d.id: d.title for d in copy} == expected
    da.close()


def test_verify_names_the_file_that_does_not_check_out(tmp_path):
    with hs.DocumentArray(Doc, storage="memory", path=tmp_path / "src") as da:
        da.extend(docs(0, 20))
    with hs.DocumentArray(Doc, storage="memory", path=tmp_path / "src", read_only=True) as da:
        da.backup(tmp_path / "bk")  # generation 1, which close() wrote: a snapshot
    assert B.verify(tmp_path / "bk")["generation"] == 1
    snap = next(p for p in (tmp_path / "bk").iterdir() if p.suffix == ".hss")
    data = bytearray(snap.read_bytes())
    data[-40] ^= 1
    snap.write_bytes(bytes(data))
    with pytest.raises(hs.BackendError, match=snap.name):
        B.verify(tmp_path / "bk")
