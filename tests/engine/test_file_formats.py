"""A collection's files of another format are refused with hs.BackendError, never misread.

Internal: the files are checksummed, so changing the format number they carry means
re-framing their records with engine/persist/records.py; DocumentArray has no way to write
an older or unknown format. Everything else goes through the public API: write a collection,
patch one number, reopen, and check that the refusal names the format and leaves the files
as they were.
"""
from __future__ import annotations

import json
import os

import pytest

import hybridsearch as hs
from hybridsearch.engine.persist import records as R

STORAGES = ["hnsw", "memory"]


class Doc(hs.Document):
    title: hs.Text
    v: hs.Vector[4]


def _written(path, storage: str) -> None:
    with hs.DocumentArray(Doc, storage=storage, path=path) as da:
        da.extend([Doc(id=f"d{i}", title=f"blue sky {i}", v=[i, 1.0, -1.0, 0.5]) for i in range(20)])
        # a write after the open leaves the log non-empty, so close() writes a snapshot
        da.append(Doc(id="last", title="red", v=[0.0, 1.0, 0.0, 0.0]))


def _files(path) -> dict:
    return {n: (path / n).read_bytes() for n in sorted(os.listdir(path)) if n != "LOCK"}


def _reframe_first_record(data: bytes, change) -> bytes:
    """The file with its first record's JSON payload passed through change(dict) -> dict and the
    record framed again (length and checksums), the rest of the file as it was."""
    kind, length, _ = R.parse_header(data[R.FILE.size:R.FILE.size + R.REC.size])
    start = R.FILE.size + R.REC.size
    meta = change(json.loads(data[start:start + length]))
    payload = json.dumps(meta).encode()
    if len(payload) != length:  # later records (a snapshot's arrays) must keep their offsets
        payload = payload.ljust(length) if len(payload) < length else None
    assert payload is not None, "the changed header is longer than the original"
    return data[:R.FILE.size] + b"".join(R.record(kind, payload)) + data[start + length:]


def _patch(path, name: str, change) -> dict:
    """Rewrites file `name` under `path` through _reframe_first_record; -> every file's bytes."""
    target = path / name
    target.write_bytes(_reframe_first_record(target.read_bytes(), change))
    return _files(path)


def _snapshot_name(path) -> str:
    [name] = [n for n in os.listdir(path) if n.startswith("snap-")]
    return name


@pytest.mark.parametrize("storage", STORAGES)
@pytest.mark.parametrize("number", [1, 3])
def test_a_manifest_of_another_format_is_refused(tmp_path, storage, number):
    path = tmp_path / "c"
    _written(path, storage)
    before = _patch(path, R.MANIFEST, lambda m: dict(m, format=number))
    with pytest.raises(hs.BackendError,
                       match=f"written by an unsupported format {number}; this version reads format {R.FORMAT}"):
        hs.DocumentArray(Doc, storage=storage, path=path)
    assert _files(path) == before  # nothing repaired, truncated or removed


@pytest.mark.parametrize("storage", STORAGES)
def test_a_snapshot_of_documents_is_refused(tmp_path, storage):
    """The snapshot layout before mapped arrays (documents in records) is not read."""
    path = tmp_path / "c"
    _written(path, storage)
    name = _snapshot_name(path)
    before = _patch(path, name, lambda m: {k: v for k, v in m.items() if k != "layout"})
    with pytest.raises(hs.BackendError, match=f"{name}.*unsupported"):
        hs.DocumentArray(Doc, storage=storage, path=path)
    assert _files(path) == before


@pytest.mark.parametrize("storage", STORAGES)
@pytest.mark.parametrize("number", [1, 3])
def test_a_text_index_of_another_format_is_refused(tmp_path, storage, number):
    path = tmp_path / "c"
    _written(path, storage)

    def change(m):
        assert m["meta"]["text"]["format"] == 2
        m["meta"]["text"]["format"] = number
        return m

    before = _patch(path, _snapshot_name(path), change)
    with pytest.raises(hs.BackendError,
                       match=f"text index .*written by an unsupported format {number}; this version reads format 2"):
        hs.DocumentArray(Doc, storage=storage, path=path)
    assert _files(path) == before


@pytest.mark.parametrize("storage", STORAGES)
def test_the_unpatched_files_open(tmp_path, storage):
    """The patching itself changes nothing: the same files re-framed with the same numbers open
    and answer as written (so the refusals above are about the number alone)."""
    path = tmp_path / "c"
    _written(path, storage)
    _patch(path, R.MANIFEST, lambda m: m)
    _patch(path, _snapshot_name(path), lambda m: m)
    with hs.DocumentArray(Doc, storage=storage, path=path) as da:
        assert len(da) == 21 and da["d3"].title == "blue sky 3"
        assert da.find(text="red", limit=3).ids == ["last"]
