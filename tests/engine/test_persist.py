"""hybridsearch.engine.persist: snapshot + log durability layer.

Round trips, replay order, torn tails at every offset, corruption fuzz (a damaged file
gives BackendError or a prefix of what was written, nothing else), kill -9 of a
writing process, and crashes at every step of a snapshot.
"""
from __future__ import annotations

import math
import mmap
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from typing import Optional

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hybridsearch as hs
# internal: the durability layer on its own is the unit under test (its files, offsets and
# crash points are not reachable through DocumentArray; tests/storages/local/test_hnsw.py
# checks the same guarantees end to end through the hnsw storage)
from hybridsearch.batch import build_batch
from hybridsearch.document import schema_of
from hybridsearch.engine.persist import DocCodec, Journal, Snapshot, records
from hybridsearch.engine.persist.codec import Corrupt

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Item(hs.Document):
    title: hs.Text
    tag: Optional[hs.Keyword] = None
    count: int = 0
    score: Optional[float] = None
    flag: bool = False
    emb: Optional[hs.Vector[3]] = None


class Other(Item):  # same field names as Item, one kind differs
    count: float = 0.0


class Wide(Item):  # Item with another vector dimension
    emb: Optional[hs.Vector[4]] = None


class Plain(hs.Document):  # no vector field, an unindexed (OTHER) field
    name: hs.Keyword
    n: Optional[int] = None
    extra: dict = {}
    labels: list[str] = []


SCHEMA = schema_of(Item)


# ------------------------------------------------------------------ helpers
def same_value(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and b.dtype == np.float32
                and b.shape == a.shape and not b.flags.writeable and b.flags.c_contiguous
                and a.tobytes() == b.tobytes())
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    return a == b


def same_doc(a, b) -> bool:
    return (type(a) is type(b) and list(a.__dict__) == list(b.__dict__)
            and all(same_value(getattr(a, f), getattr(b, f)) for f in type(a).model_fields))


def same_docs(xs, ys) -> bool:
    return len(xs) == len(ys) and all(same_doc(a, b) for a, b in zip(xs, ys))


def same_op(x, y) -> bool:
    if x[0] != y[0] or len(x) != len(y):
        return False
    if x[0] == "upsert":
        return same_docs(x[1], y[1])
    if x[0] == "delete":
        return list(x[1]) == list(y[1])
    if x[0] == "update_many":
        return list(x[1]) == list(y[1]) and same_doc(x[2], y[2]) and list(x[3]) == list(y[3])
    return same_doc(x[1], y[1]) and list(x[2]) == list(y[2])


def same_ops(xs, ys) -> bool:
    return len(xs) == len(ys) and all(same_op(a, b) for a, b in zip(xs, ys))


def write_snapshot(j: Journal, docs: list, extras: Optional[dict] = None) -> None:
    """A snapshot of `docs` (the log's encoding as one byte array) and `extras` (name -> bytes,
    such as a graph): the journal stores meta and arrays, and what they mean is the storage's
    affair, so the tests give them a meaning they can check."""
    arrays = {"docs": np.frombuffer(DocCodec(j.schema).encode(list(docs)), dtype=np.uint8)}
    arrays.update({f"extra/{k}": np.frombuffer(v, dtype=np.uint8) for k, v in (extras or {}).items()})
    j.snapshot_arrays({"count": len(docs)}, arrays)


def snap_docs(snap: Snapshot, schema=SCHEMA) -> list:
    """The documents write_snapshot put in a snapshot."""
    docs = DocCodec(schema).decode(bytes(snap.arrays["docs"]))
    assert len(docs) == snap.meta["count"]
    return docs


def snap_extras(snap: Snapshot) -> dict:
    return {k[len("extra/"):]: bytes(v) for k, v in snap.arrays.items() if k.startswith("extra/")}


def same_snapshot(a: Optional[Snapshot], b: Optional[Snapshot]) -> bool:
    if a is None or b is None:
        return a is b
    return same_docs(snap_docs(a), snap_docs(b)) and snap_extras(a) == snap_extras(b)


def item(i: int, vec: bool = True, **kw) -> Item:
    base = dict(id=f"d{i}", title=f"title {i} ☃ é", tag=None if i % 3 == 0 else f"t{i % 4}",
                count=i * 7 - 3, score=None if i % 2 else i / 3, flag=bool(i % 2),
                emb=[i, -0.5, 1e-3 * i] if vec and i % 5 else None)
    base.update(kw)
    return Item(**base)


def apply(snapshot: Optional[Snapshot], ops: list) -> dict:
    """id -> document after replaying the operations on the snapshot."""
    state = {d.id: d for d in snap_docs(snapshot)} if snapshot else {}
    for op in ops:
        if op[0] == "upsert":
            state.update({d.id: d for d in op[1]})
        elif op[0] == "delete":
            for i in op[1]:
                state.pop(i, None)
        else:
            state[op[1].id] = op[1]
    return state


def listing(path) -> set:
    return set(os.listdir(path))


@pytest.fixture
def no_fsync(monkeypatch):
    """For tests that reopen hundreds of times: the logic under test does not depend on fsync."""
    monkeypatch.setattr(os, "fsync", lambda fd: None)


# --------------------------------------------------------------- round trips
# vector elements whose norms stay inside the range every storage accepts (document.VECTOR_NORM_MIN/MAX)
finite32 = (st.just(0.0) | st.floats(2 ** -46, 2.0 ** 46, width=32) | st.floats(-(2.0 ** 46), -(2 ** -46), width=32))
# (a lone surrogate has no UTF-8 form and is refused at validation: tests/contract/test_reliability.py)
texts = st.text(max_size=20) | st.sampled_from(["", "\x00", "日本語", "\U0001F600", '"\\'])
ids = st.text(min_size=1, max_size=12) | st.from_regex(r"[a-z0-9]{1,8}", fullmatch=True)


@st.composite
def items(draw):
    return Item(
        id=draw(ids),
        title=draw(texts),
        tag=draw(st.none() | texts),
        count=draw(st.integers(-(2**63), 2**63 - 1)),
        score=draw(st.none() | st.floats(allow_nan=False, allow_infinity=False)),
        flag=draw(st.booleans()),
        emb=draw(st.none() | st.lists(finite32, min_size=3, max_size=3)),
    )


def unique(docs: list) -> list:
    return list({d.id: d for d in docs}.values())


@settings(max_examples=200, deadline=None)
@given(st.lists(items(), max_size=12))
def test_codec_round_trip(docs):
    docs = unique(docs)
    codec = DocCodec(SCHEMA)
    out = codec.decode(codec.encode(docs))
    assert same_docs(docs, out)
    for d in out:
        assert d.model_fields_set == set(Item.model_fields)


@settings(max_examples=200, deadline=None)
@given(st.lists(items(), max_size=12))
def test_a_batch_encodes_from_its_columns_as_its_documents_do(docs):
    docs = unique(docs)
    codec = DocCodec(SCHEMA)
    batch = build_batch(SCHEMA, docs)
    batch.given_docs = None  # as from extend_columns: only columns
    out = codec.decode(codec.encode_batch(batch))
    assert same_docs(docs, out)
    assert batch.given_docs is None  # no document was built to write it


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(items(), max_size=6), max_size=4), st.data())
def test_journal_round_trip(batches, data):
    batches = [unique(b) for b in batches]
    with tempfile.TemporaryDirectory() as d:
        j = Journal(d, SCHEMA)
        written = []
        for b in batches:
            j.log_upsert(b)
            written.append(("upsert", b))
            if b and data.draw(st.booleans()):
                j.log_delete([b[0].id, "missing"])
                written.append(("delete", [b[0].id, "missing"]))
                j.log_update(b[-1], ["title", "emb"])
                written.append(("update", b[-1], ["title", "emb"]))
        j.close()
        j = Journal(d, SCHEMA)
        snap, ops = j.load()
        j.close()
        assert snap is None
        assert same_ops(written, ops)


def test_vectors_are_owned_read_only_float32(tmp_path):
    docs = [item(i) for i in range(1, 5)]
    with Journal(tmp_path, SCHEMA) as j:
        j.log_upsert(docs)
    with Journal(tmp_path, SCHEMA) as j:
        _, [(_, out)] = j.load()
    for a, b in zip(docs, out):
        assert b.emb.dtype == np.float32 and b.emb.shape == (3,) and not b.emb.flags.writeable
        assert b.emb.flags.owndata and a.emb.tobytes() == b.emb.tobytes()
        with pytest.raises(ValueError):
            b.emb[0] = 1.0


def test_schema_without_vector_and_other_fields(tmp_path):
    docs = [Plain(id="a", name="x", n=None, extra={"k": [1, 2.5, None, "ü"]}, labels=["p", "q"]),
            Plain(id="b", name="y", n=2**62)]
    with Journal(tmp_path, Plain) as j:
        j.log_upsert(docs)
        write_snapshot(j, docs)
        j.log_update(docs[0], ["labels"])
    with Journal(tmp_path, Plain) as j:
        snap, ops = j.load()
    assert same_docs(docs, snap_docs(snap, schema_of(Plain))) and snap_extras(snap) == {}
    assert same_ops([("update", docs[0], ["labels"])], ops)


def test_replay_order_snapshot_and_log(tmp_path):
    j = Journal(tmp_path, SCHEMA)
    assert j.load() == (None, [])
    assert j.log_bytes == 0
    first = [item(i) for i in range(6)]
    j.log_upsert(first)
    j.log_delete(["d1"])
    changed = item(2, title="new title", emb=None)
    j.log_update(changed, ["title", "emb"])
    assert j.log_bytes > 0
    snap, ops = j.load()
    assert snap is None and [o[0] for o in ops] == ["upsert", "delete", "update"]
    state = apply(None, ops)
    live = [state[k] for k in sorted(state)]
    graph = bytes(range(256)) * 50
    extras = {"graph": graph, "empty": b"", "ünï": b"\x00"}
    write_snapshot(j, live, extras)
    assert j.log_bytes == 0
    after = [("upsert", [item(10), item(3, count=-1)]), ("delete", ["d0", "d10"]),
             ("update", item(4, flag=True), ["flag"]), ("upsert", [])]
    j.log_upsert(after[0][1])
    j.log_delete(after[1][1])
    j.log_update(after[2][1], after[2][2])
    j.log_upsert([])
    j.close()
    assert listing(tmp_path) == {"MANIFEST", "LOCK", "snap-0000000001.hss", "log-0000000001.hsl"}

    j = Journal(tmp_path, SCHEMA)
    snap, ops = j.load()
    assert same_docs(live, snap_docs(snap)) and snap_extras(snap) == extras
    assert same_ops(after, ops)
    # a second snapshot replaces the first and the log
    state = apply(snap, ops)
    live2 = list(state.values())
    write_snapshot(j, live2)
    j.close()
    assert listing(tmp_path) == {"MANIFEST", "LOCK", "snap-0000000002.hss", "log-0000000002.hsl"}
    with Journal(tmp_path, SCHEMA) as j:
        snap, ops = j.load()
    assert ops == [] and same_docs(live2, snap_docs(snap)) and snap_extras(snap) == {}


def test_load_sees_every_write_of_the_same_journal(tmp_path):
    with Journal(tmp_path, SCHEMA) as j:
        j.log_upsert([item(1)])
        assert len(j.load()[1]) == 1
        j.log_delete(["d1"])
        assert [o[0] for o in j.load()[1]] == ["upsert", "delete"]
        write_snapshot(j, [item(2)])
        assert j.load()[1] == []
        j.log_upsert([item(3)])
        snap, ops = j.load()
        assert [d.id for d in snap_docs(snap)] == ["d2"] and same_ops([("upsert", [item(3)])], ops)


def test_bad_arguments_write_nothing(tmp_path):
    with Journal(tmp_path, SCHEMA) as j:
        with pytest.raises(hs.SchemaError):
            j.log_upsert([Plain(name="x")])
        with pytest.raises(hs.SchemaError):
            j.log_update(item(1), ["nope"])
        with pytest.raises(hs.SchemaError, match="repeated id"):
            j.log_upsert([item(1), item(1, title="again")])
        assert j.log_bytes == 0
        assert j.load() == (None, [])
    with pytest.raises(hs.BackendError, match="closed"):
        j.log_upsert([item(1)])


# ------------------------------------------------------------ file problems
def test_other_schema_is_refused(tmp_path):
    with Journal(tmp_path, SCHEMA) as j:
        j.log_upsert([item(1)])
    for other, what in ((Other, "count"), (Wide, "dimension 3 there, 4 here"), (Plain, "name")):
        with pytest.raises(hs.BackendError, match="different schema") as e:
            Journal(tmp_path, other)
        assert os.path.join(str(tmp_path), "MANIFEST") in str(e.value) and what in str(e.value)
    with Journal(tmp_path, SCHEMA) as j:  # still fine with the right one
        assert len(j.load()[1]) == 1


def test_a_file_where_the_folder_should_be(tmp_path):
    f = tmp_path / "afile"
    f.write_bytes(b"")
    with pytest.raises(hs.BackendError, match="afile"):
        Journal(f, SCHEMA)


@pytest.mark.parametrize("writes, victim, as_folder", [
    ("log snapshot", "log-0000000001.hsl", False),
    ("snapshot", "snap-0000000001.hss", False),
    ("log", "log-0000000000.hsl", True),
    ("log", "MANIFEST", False),  # data without a manifest is not silently replaced
])
def test_missing_and_misplaced_files(tmp_path, writes, victim, as_folder):
    with Journal(tmp_path, SCHEMA) as j:
        if "log" in writes:
            j.log_upsert([item(1)])
        if "snapshot" in writes:
            write_snapshot(j, [item(1)])
    (tmp_path / victim).unlink()
    if as_folder:
        (tmp_path / victim).mkdir()
    with pytest.raises(hs.BackendError, match=victim):
        Journal(tmp_path, SCHEMA)


@pytest.mark.parametrize("victim", ["MANIFEST", "log-0000000001.hsl", "snap-0000000001.hss"])
def test_unreadable_file(tmp_path, monkeypatch, victim):
    with Journal(tmp_path, SCHEMA) as j:
        write_snapshot(j, [item(1)])
        j.log_upsert([item(2)])
    target = os.path.join(str(tmp_path), victim)
    real_open, real_os_open = open, os.open

    def deny(path, *args, **kw):
        if os.fspath(path) == target:
            raise PermissionError(13, "Permission denied", path)
        return real_open(path, *args, **kw)

    def deny_os(path, *args, **kw):
        if os.fspath(path) == target:
            raise PermissionError(13, "Permission denied", path)
        return real_os_open(path, *args, **kw)

    monkeypatch.setattr("builtins.open", deny)
    monkeypatch.setattr(os, "open", deny_os)
    with pytest.raises(hs.BackendError, match="Permission denied") as e:
        with Journal(tmp_path, SCHEMA) as j:
            j.load()
    assert target in str(e.value)


def test_stale_files_are_cleaned(tmp_path):
    with Journal(tmp_path, SCHEMA) as j:
        j.log_upsert([item(1)])
    for name in ("snap-0000000005.hss", "snap-0000000001.hss.tmp", "log-0000000003.hsl",
                 "MANIFEST.tmp", "log-0000000000.hsl.tmp"):
        (tmp_path / name).write_bytes(b"junk")
    (tmp_path / "notes.txt").write_bytes(b"not ours")
    with Journal(tmp_path, SCHEMA) as j:
        assert len(j.load()[1]) == 1
    assert listing(tmp_path) == {"MANIFEST", "LOCK", "log-0000000000.hsl", "notes.txt"}


def test_bad_record_followed_by_data_is_an_error(tmp_path):
    with Journal(tmp_path, SCHEMA) as j:
        j.log_upsert([item(1)])
        mid = j.log_bytes
        j.log_upsert([item(2)])
    log = tmp_path / "log-0000000000.hsl"
    data = bytearray(log.read_bytes())
    data[records.FILE.size + mid // 2] ^= 0x40  # inside the first record's payload
    log.write_bytes(bytes(data))
    with pytest.raises(hs.BackendError, match="log-0000000000.hsl"):
        Journal(tmp_path, SCHEMA)
    assert log.read_bytes() == bytes(data)  # nothing truncated on an error


def test_zero_filled_tail_is_dropped(tmp_path):
    with Journal(tmp_path, SCHEMA) as j:
        j.log_upsert([item(1)])
    log = tmp_path / "log-0000000000.hsl"
    good = log.read_bytes()
    log.write_bytes(good + b"\x00" * 4096)
    with Journal(tmp_path, SCHEMA) as j:
        assert len(j.load()[1]) == 1
    assert log.read_bytes() == good


# ------------------------------------------------------------------- torn tail
def _small_log(path) -> tuple:
    """A log of a few records of every kind; -> (written ops, record end offsets in the file)."""
    written = [("upsert", [item(1), item(2)]), ("delete", ["d1"]),
               ("update", item(2, title="x"), ["title"]), ("upsert", [item(3)])]
    ends = [records.FILE.size]
    with Journal(path, SCHEMA) as j:
        j.log_upsert(written[0][1])
        ends.append(records.FILE.size + j.log_bytes)
        j.log_delete(written[1][1])
        ends.append(records.FILE.size + j.log_bytes)
        j.log_update(written[2][1], written[2][2])
        ends.append(records.FILE.size + j.log_bytes)
        j.log_upsert(written[3][1])
        ends.append(records.FILE.size + j.log_bytes)
    return written, ends


def test_torn_tail_at_every_offset(tmp_path, no_fsync):
    src = tmp_path / "src"
    written, ends = _small_log(src)
    log_name = "log-0000000000.hsl"
    full = (src / log_name).read_bytes()
    assert len(full) == ends[-1]
    extra = item(9)
    work = tmp_path / "work"
    for cut in range(len(full)):
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(src, work)
        with open(work / log_name, "r+b") as f:
            f.truncate(cut)
        complete = sum(1 for e in ends[1:] if e <= cut)
        if cut < records.FILE.size:
            # no crash cuts into the header (it is written before the rename that publishes
            # the log): such a log lost every write since the snapshot, which is an error
            with pytest.raises(hs.BackendError, match="shorter .* than its own header"):
                Journal(work, SCHEMA)
            assert os.path.getsize(work / log_name) == cut, cut  # left as found
            continue
        j = Journal(work, SCHEMA)
        snap, ops = j.load()
        assert snap is None
        assert same_ops(written[:complete], ops), cut
        assert os.path.getsize(work / log_name) == ends[complete], cut
        j.log_upsert([extra])
        j.close()
        with Journal(work, SCHEMA) as j:
            _, ops = j.load()
        assert same_ops(written[:complete] + [("upsert", [extra])], ops), cut


# ------------------------------------------------------------ corruption fuzz
def _reference_collection(path) -> tuple:
    """A snapshot plus a log; -> (snapshot, ops written after it)."""
    with Journal(path, SCHEMA) as j:
        docs = [item(i) for i in range(8)]
        j.log_upsert(docs)
        write_snapshot(j, docs, {"graph": bytes(range(64))})
        ops = [("upsert", [item(20), item(21)]), ("delete", ["d3"]),
               ("update", item(4, score=0.25), ["score"]), ("upsert", [item(22)]),
               ("update_many", ["d5", "d6", "dé"], item(5, count=1), ["count", "flag"])]
        j.log_upsert(ops[0][1])
        j.log_delete(ops[1][1])
        j.log_update(ops[2][1], ops[2][2])
        j.log_upsert(ops[3][1])
        j.log_update_many(ops[4][1], ops[4][2], ops[4][3])
        snap, _ = j.load()
    return snap, ops


_FUZZ: dict = {}


def _fuzz_reference():
    if not _FUZZ:
        d = tempfile.mkdtemp(prefix="hs-persist-ref-")
        snap, ops = _reference_collection(d)
        _FUZZ.update(dir=d, snap=snap, ops=ops,
                     files={n: open(os.path.join(d, n), "rb").read() for n in os.listdir(d) if n != "LOCK"})
    return _FUZZ


mutation = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 10**6), st.integers(1, 255)),
    st.tuples(st.just("insert"), st.integers(0, 10**6), st.binary(min_size=1, max_size=8)),
    st.tuples(st.just("delete"), st.integers(0, 10**6), st.integers(1, 40)),
    st.tuples(st.just("truncate"), st.integers(0, 10**6), st.just(0)),
    st.tuples(st.just("overwrite"), st.integers(0, 10**6), st.binary(min_size=1, max_size=24)),
)


def _mutate(data: bytes, m) -> bytes:
    op, pos, arg = m
    pos = pos % (len(data) + (op == "insert"))
    b = bytearray(data)
    if op == "flip":
        b[pos] ^= arg
    elif op == "insert":
        b[pos:pos] = arg
    elif op == "delete":
        del b[pos:pos + arg]
    elif op == "truncate":
        del b[pos:]
    else:
        b[pos:pos + len(arg)] = arg
    return bytes(b)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(target=st.sampled_from(["log-0000000001.hsl", "snap-0000000001.hss", "MANIFEST"]),
       mutations=st.lists(mutation, min_size=1, max_size=3))
def test_corruption_gives_backend_error_or_a_prefix(no_fsync, target, mutations):
    ref = _fuzz_reference()
    with tempfile.TemporaryDirectory() as d:
        for name, data in ref["files"].items():
            if name == target:
                for m in mutations:
                    data = _mutate(data, m) if data else data
            with open(os.path.join(d, name), "wb") as f:
                f.write(data)
        try:
            j = Journal(d, SCHEMA)
            try:
                snap, ops = j.load()
                # whatever loads is the real snapshot and a prefix of the logged operations
                assert same_snapshot(ref["snap"], snap)
                assert same_ops(ref["ops"][:len(ops)], ops)
                j.log_delete(["after"])  # and the log takes appends again
                j.close()
                with Journal(d, SCHEMA) as j2:
                    _, ops2 = j2.load()
                assert same_ops(ops + [("delete", ["after"])], ops2)
            finally:
                j.close()
        except hs.BackendError as e:
            assert d in str(e)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_codec_never_crashes_on_garbage(payload):
    codec = DocCodec(SCHEMA)
    try:
        codec.decode(payload)
    except Corrupt:
        pass


# ------------------------------------------------------- crashes in snapshot
class Crash(BaseException):
    """A simulated process death: no cleanup code catches it."""


def _state(path) -> dict:
    with Journal(path, SCHEMA) as j:
        return apply(*j.load())


def _same_state(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(same_doc(a[k], b[k]) for k in a)


def _prepare(path) -> tuple:
    """A collection with a snapshot and a log; -> (state now, the docs of the next snapshot)."""
    with Journal(path, SCHEMA) as j:
        j.log_upsert([item(i) for i in range(5)])
        write_snapshot(j, [item(i) for i in range(5)], {"graph": b"old"})
        j.log_upsert([item(7)])
        j.log_delete(["d0"])
    before = _state(path)
    return before, list(before.values())


@pytest.mark.parametrize("after_call", [False, True], ids=["before-call", "after-call"])
def test_crash_at_every_step_of_a_snapshot(tmp_path, monkeypatch, after_call):
    real = {name: getattr(os, name) for name in ("replace", "fsync", "remove")}
    step = 0
    crashes = 0
    while True:
        d = tmp_path / f"c{step}"
        before, docs = _prepare(d)
        j = Journal(d, SCHEMA)
        j.load()
        calls = [0]

        def wrap(name):
            def f(*args, **kw):
                calls[0] += 1
                if calls[0] == step + 1:
                    if after_call:
                        real[name](*args, **kw)
                    raise Crash(name)
                return real[name](*args, **kw)
            return f

        for name in real:
            monkeypatch.setattr(os, name, wrap(name))
        try:
            write_snapshot(j, docs, {"graph": b"new"})
            crashed = False
        except Crash:
            crashed = True
        finally:
            for name in real:
                monkeypatch.setattr(os, name, real[name])
        j._close_fds()  # internal: the process is gone (no close(), which would write); frees the LOCK
        with Journal(d, SCHEMA) as j2:
            snap, ops = j2.load()
        assert _same_state(before, apply(snap, ops)), step
        graph = snap_extras(snap)["graph"]
        assert graph in (b"old", b"new")
        if graph == b"new":
            assert ops == []
        gen = 2 if graph == b"new" else 1
        assert listing(d) == {"MANIFEST", "LOCK", f"snap-{gen:010d}.hss", f"log-{gen:010d}.hsl"}, step
        if not crashed:
            break
        crashes += 1
        step += 1
    assert crashes >= 8  # every write, sync and rename of the protocol was hit


def test_failed_rename_keeps_the_journal_usable(tmp_path, monkeypatch):
    before, docs = _prepare(tmp_path)
    real_replace = os.replace
    for fail_at in range(3):  # the snapshot file, the new log, the manifest
        j = Journal(tmp_path, SCHEMA)
        j.load()
        calls = [0]

        def replace(src, dst):
            calls[0] += 1
            if calls[0] == fail_at + 1:
                raise PermissionError(13, "Permission denied", dst)
            return real_replace(src, dst)

        monkeypatch.setattr(os, "replace", replace)
        with pytest.raises(hs.BackendError) as e:
            write_snapshot(j, docs, {"graph": b"new"})
        monkeypatch.setattr(os, "replace", real_replace)
        assert str(tmp_path) in str(e.value)
        assert listing(tmp_path) == {"MANIFEST", "LOCK", "snap-0000000001.hss", "log-0000000001.hsl"}
        j.log_delete([f"nothing{fail_at}"])  # still appends to the current log
        j.close()
        assert _same_state(before, _state(tmp_path))
    with Journal(tmp_path, SCHEMA) as j:
        snap, ops = j.load()
    assert snap_extras(snap) == {"graph": b"old"} and [o[0] for o in ops] == ["upsert", "delete"] + ["delete"] * 3


def test_failed_append_is_taken_back(tmp_path, monkeypatch):
    with Journal(tmp_path, SCHEMA) as j:
        j.log_upsert([item(1)])
        size = j.log_bytes
        real = os.pwrite
        calls = [0]

        def pwrite(fd, data, offset):
            calls[0] += 1
            if calls[0] == 2:  # header written, payload fails
                raise OSError(28, "No space left on device")
            return real(fd, data, offset)

        monkeypatch.setattr(os, "pwrite", pwrite)
        with pytest.raises(hs.BackendError, match="No space"):
            j.log_upsert([item(2)])
        monkeypatch.setattr(os, "pwrite", real)
        assert j.log_bytes == size
        j.log_upsert([item(3)])
    with Journal(tmp_path, SCHEMA) as j:
        _, ops = j.load()
    assert [[d.id for d in o[1]] for o in ops] == [["d1"], ["d3"]]


# ---------------------------------------------------------- other processes
CHILD = textwrap.dedent("""
    import sys
    sys.path.insert(0, {root!r})
    import numpy as np
    from hybridsearch.engine.persist import Journal
    from tests.engine.test_persist import Item, snap_docs, write_snapshot

    def batch(b):
        return [Item(id=f"b{{b}}-{{i}}", title="x" * (b % 50) + str(i), count=b, score=i / 7,
                     emb=[b, i, 0.5]) for i in range({per})]

    j = Journal(sys.argv[1], Item)
    snap, ops = j.load()
    state = {{d.id: d for d in snap_docs(snap)}} if snap else {{}}
    for op in ops:
        state.update({{d.id: d for d in op[1]}})
    b = int(sys.argv[2])
    print("ready", flush=True)
    while True:
        docs = batch(b)
        j.log_upsert(docs)
        print(b, flush=True)
        state.update({{d.id: d for d in docs}})
        if b % 6 == 5:
            live = list(state.values())
            write_snapshot(j, live, {{"graph": bytes(200_000)}})
        b += 1
""")
PER = 40


def _batches_present(path) -> dict:
    """batch number -> its documents, checking each batch is whole and exact."""
    with Journal(path, SCHEMA) as j:
        state = apply(*j.load())
    by_batch: dict = {}
    for doc in state.values():
        b, i = map(int, doc.id[1:].split("-"))
        by_batch.setdefault(b, []).append((i, doc))
    for b, docs in by_batch.items():
        assert sorted(i for i, _ in docs) == list(range(PER)), f"batch {b} is partial"
        for i, doc in docs:
            assert doc.title == "x" * (b % 50) + str(i) and doc.count == b and doc.score == i / 7
            assert doc.emb.tolist() == [b, i, 0.5]
    return by_batch


def test_kill_9_loses_no_acknowledged_batch(tmp_path):
    rng = random.Random(1234)
    path = str(tmp_path / "col")
    code = CHILD.format(root=ROOT, per=PER)
    t0 = time.monotonic()
    rounds = 0
    next_batch = 0
    acked_all: set = set()
    while rounds < 6 and (rounds < 3 or time.monotonic() - t0 < 8):
        child = subprocess.Popen([sys.executable, "-c", code, path, str(next_batch)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert child.stdout.readline().strip() == "ready", child.stderr.read()
            want = rng.randint(1, 25)
            acked = []
            while len(acked) < want:
                line = child.stdout.readline()
                assert line, child.stderr.read()
                acked.append(int(line))
            time.sleep(rng.random() * 0.02)
            os.kill(child.pid, signal.SIGKILL)
            # read() first takes what readline() already buffered; communicate() reads the pipe
            # past that buffer, so acknowledgements printed together were lost under load
            rest = child.stdout.read()
            child.wait(timeout=10)
            acked += [int(x) for x in rest.split()]
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
        assert child.returncode == -signal.SIGKILL
        acked_all.update(acked)
        present = _batches_present(path)
        assert set(present) == set(range(len(present))), "batches present are not a prefix"
        assert acked_all <= set(present), f"acknowledged batches lost: {sorted(acked_all - set(present))}"
        assert len(present) <= max(acked_all) + 2
        next_batch = len(present)
        rounds += 1
    assert rounds >= 3


def test_a_second_process_cannot_open_it(tmp_path):
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {ROOT!r})
        import hybridsearch as hs
        from hybridsearch.engine.persist import Journal
        class Item(hs.Document):
            title: hs.Text
        try:
            Journal(sys.argv[1], Item)
        except hs.BackendError as e:
            print("refused:", e)
    """)
    with Journal(tmp_path, SCHEMA):
        out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                             text=True, timeout=60)
    assert "refused:" in out.stdout and "another process" in out.stdout, out.stderr


# ------------------------------------------------------------- snapshots of mapped arrays
def _arrays() -> dict:
    return {"ints": np.arange(10, dtype=np.int64), "matrix": np.arange(12, dtype=np.float32).reshape(3, 4),
            "bytes": np.frombuffer(b"xyz", dtype=np.uint8), "empty": np.zeros(0, dtype=np.int32),
            "codes": np.array([-3, 5], dtype=np.int8)}


def _mapped(a: np.ndarray) -> bool:
    while isinstance(a, (np.ndarray, memoryview)):
        a = a.base if isinstance(a, np.ndarray) else a.obj
    return isinstance(a, mmap.mmap)


def test_array_snapshot_maps_aligned_views_copy_on_write(tmp_path):
    with Journal(tmp_path, SCHEMA) as j:
        j.log_upsert([item(1)])
        j.snapshot_arrays({"k": [1, "x"]}, _arrays())
        j.log_delete(["d1"])
        snap, ops = j.load()
    assert snap.meta == {"k": [1, "x"]} and same_ops([("delete", ["d1"])], ops)
    assert set(snap.arrays) == set(_arrays())
    for name, want in _arrays().items():
        got = snap.arrays[name]
        assert got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want), name
        if got.size:
            assert _mapped(got) and got.ctypes.data % records.ALIGN == 0, name
    snap.arrays["ints"][:] = -1  # a private copy of the page: the file keeps what was written
    snap.release()
    with Journal(tmp_path, SCHEMA) as j:
        again, _ = j.load()
    assert np.array_equal(again.arrays["ints"], np.arange(10))


def test_array_snapshot_refuses_what_it_cannot_map(tmp_path):
    with Journal(tmp_path, SCHEMA) as j:
        for bad in ({"objects": np.array(["a"], dtype=object)}, {"cube": np.zeros((2, 2, 2))},
                    {3: np.zeros(2)}):
            with pytest.raises(ValueError):
                j.snapshot_arrays({}, bad)
        with pytest.raises(TypeError):
            j.snapshot_arrays({"x": object()}, {})
        _, _ = j.load()
    assert listing(tmp_path) == {"MANIFEST", "LOCK", "log-0000000000.hsl"}


_ARRAY_FUZZ: dict = {}


@settings(max_examples=300, deadline=None)
@given(mutations=st.lists(mutation, min_size=1, max_size=3))
def test_array_snapshot_corruption_gives_backend_error(mutations):
    if not _ARRAY_FUZZ:
        d = tempfile.mkdtemp(prefix="hs-persist-arrays-")
        with Journal(d, SCHEMA) as j:
            j.snapshot_arrays({"k": 1}, _arrays())
        _ARRAY_FUZZ.update({n: open(os.path.join(d, n), "rb").read() for n in os.listdir(d) if n != "LOCK"})
    with tempfile.TemporaryDirectory() as d:
        for name, data in _ARRAY_FUZZ.items():
            if name.startswith("snap-"):
                for m in mutations:
                    data = _mutate(data, m) if data else data
                changed = data != _ARRAY_FUZZ[name]
            with open(os.path.join(d, name), "wb") as f:
                f.write(data)
        try:
            with Journal(d, SCHEMA) as j:
                snap, _ = j.load()
        except hs.BackendError as e:
            assert d in str(e)
            return
        assert not changed  # every changed byte is caught by a checksum or the size in MANIFEST
        assert all(np.array_equal(snap.arrays[k], v) for k, v in _arrays().items())
