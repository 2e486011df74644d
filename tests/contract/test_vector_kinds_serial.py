"""Writes of section-10 fields (hs.SparseVector, hs.MultiVector[d]) are serializable too.

Three threads run seeded random programs of update_many, update, extend, delete by filter and by
ids that write a sparse and a multi-vector value stamped with the call, and finds by each kind;
their results and the final state must be those of some serial order of the calls that respects
real time (the model: a dict; the search: test_serializable._serial_order), round after round; a
file-backed collection reopens in the final state. Public API only."""
import random
from typing import Optional

import hybridsearch as hs
from tests.conftest import storage_fixture
from tests.contract.section10 import PERSISTENT
from tests.contract.test_serializable import _run_programs, _serial_order

storage = storage_fixture(("memory", "memory-path", "hnsw", "hnsw-path", "sqlite", "qdrant", "qdrant-path"))
STATUSES = ("a", "b", "c")
IDS = [f"j{i}" for i in range(8)]
EVERY_STAMP = {k: 1.0 for k in range(1000, 5000)}  # a sparse query every written value shares a key with


class Job(hs.Document):
    status: hs.Keyword = "a"
    n: int = 0
    sv: hs.SparseVector = {}
    mv: Optional[hs.MultiVector[2]] = None


def _values(stamp: int) -> dict:
    """The fields a write stamped `stamp` sets: n, a sparse value of one key, a one-row block."""
    return {"n": stamp, "sv": {stamp: 1.0}, "mv": [[float(stamp), 1.0]]}


def _program(rnd: random.Random, thread: int, length: int) -> list:
    ops = []
    for k in range(length):
        stamp = 1000 * (thread + 1) + k
        kind = rnd.choice(["update_many", "update", "extend", "delete_filter", "delete_ids", "find_sv", "find_mv"])
        if kind == "update_many":
            ops.append((kind, rnd.choice(STATUSES), rnd.choice(STATUSES), stamp))
        elif kind == "update":
            ops.append((kind, rnd.choice(IDS), rnd.choice(STATUSES), stamp))
        elif kind == "extend":
            ops.append((kind, tuple((i, rnd.choice(STATUSES), stamp) for i in rnd.sample(IDS, rnd.randint(1, 2)))))
        elif kind == "delete_filter":
            ops.append((kind, rnd.choice(STATUSES)))
        elif kind == "delete_ids":
            ops.append((kind, tuple(rnd.sample(IDS, rnd.randint(1, 2)))))
        else:
            ops.append((kind, rnd.choice(STATUSES)))
    return ops


def _call(da, op):
    kind = op[0]
    if kind == "update_many":
        return da.update_many({"status": op[1]}, status=op[2], **_values(op[3]))
    if kind == "update":
        try:
            da.update(op[1], status=op[2], **_values(op[3]))
            return "ok"
        except KeyError:
            return "absent"
    if kind == "extend":
        da.extend([Job(id=i, status=s, **_values(n)) for i, s, n in op[1]])
        return None
    if kind == "delete_filter":
        return da.delete(filter={"status": op[1]})
    if kind == "delete_ids":
        return da.delete(list(op[1]))
    # the documents of a status holding a value of the kind, with the stamp each scores by
    if kind == "find_sv":
        res = da.find(vector={"sv": EVERY_STAMP}, filter={"status": op[1]}, limit=len(IDS))
        return sorted(res.ids)
    res = da.find(vector={"mv": [[1.0, 0.0]]}, filter={"status": op[1]}, limit=len(IDS), exact=True)
    return sorted(zip(res.ids, [round(float(s)) for s in res.scores]))


def _model(state: dict, op) -> tuple:
    """state: id -> (status, stamp or 0 for a document written without values)."""
    kind = op[0]
    if kind == "update_many":
        hit = [i for i, (s, _) in state.items() if s == op[1]]
        return {**state, **{i: (op[2], op[3]) for i in hit}}, len(hit)
    if kind == "update":
        if op[1] not in state:
            return state, "absent"
        return {**state, op[1]: (op[2], op[3])}, "ok"
    if kind == "extend":
        return {**state, **{i: (s, n) for i, s, n in op[1]}}, None
    if kind == "delete_filter":
        keep = {i: v for i, v in state.items() if v[0] != op[1]}
        return keep, len(state) - len(keep)
    if kind == "delete_ids":
        keep = {i: v for i, v in state.items() if i not in op[1]}
        return keep, len(state) - len(keep)
    held = {i: n for i, (s, n) in state.items() if s == op[1] and n}
    if kind == "find_sv":
        return state, sorted(held)
    return state, sorted(held.items())  # MaxSim of [[1, 0]] against [[stamp, 1]] by ip: the stamp


def _state(da) -> dict:
    out = {}
    for d in da:
        stamp = d.n
        # the three fields of one write travel together: any tear shows here
        assert d.sv == ({stamp: 1.0} if stamp else {}), (d.id, d.sv, stamp)
        assert (d.mv is None) == (stamp == 0) and (d.mv is None or float(d.mv[0][0]) == stamp), (d.id, d.mv)
        out[d.id] = (d.status, stamp)
    return out


def _open(make_da, storage, tmp_path):
    if storage in PERSISTENT:
        kind, name = PERSISTENT[storage]
        return make_da(Job, path=tmp_path / name, metric="ip")
    return make_da(Job, metric="ip")


def test_concurrent_writes_of_vector_kinds_equal_some_serial_order(make_da, storage, tmp_path):
    da = _open(make_da, storage, tmp_path)
    final = {}
    for round_ in range(10):
        rnd = random.Random(round_)
        start = {i: (rnd.choice(STATUSES), 0) for i in IDS[:5]}
        da.delete([d.id for d in da])
        da.extend([Job(id=i, status=s) for i, (s, _) in start.items()])
        assert _state(da) == start
        history = _run_programs(da, [_program(rnd, t, 4) for t in range(3)], _call)
        final = _state(da)
        order = _serial_order(start, history, final, _model)
        assert order is not None, (f"round {round_}: no serial order of these calls gives their results "
                                   f"and the final state", start, history, final)
    if storage in PERSISTENT:
        da.close()
        kind, name = PERSISTENT[storage]
        with hs.DocumentArray(Job, storage=kind, path=tmp_path / name, metric="ip") as again:
            assert _state(again) == final
