"""kill -9 during writes of section-10 fields (hs.SparseVector, hs.MultiVector[d]) on every
file-backed storage holding them: after reopening, the collection equals the dict model after
every acknowledged call, or after one more (the call in flight applies wholly or not at all).

A child process writes a deterministic sequence (extend, update_many, delete by filter; each
write sets a sparse and a multi-vector value stamped with its call number) and prints each
call's number once it has returned. Public API only."""
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

import pytest

import hybridsearch as hs
from tests.conftest import STORAGES
from tests.contract.section10 import PERSISTENT
from tests.contract.test_crash import acks

ROOT = Path(__file__).resolve().parents[2]
KILLED = [s for s in PERSISTENT if s in STORAGES]


class Doc(hs.Document):
    tag: hs.Keyword = "a"
    n: int = 0
    sv: hs.SparseVector = {}
    mv: Optional[hs.MultiVector[2]] = None


def _values(stamp: int) -> dict:
    return {"n": stamp, "sv": {stamp: 1.0, stamp + 100_000: 0.5}, "mv": [[float(stamp), 1.0], [1.0, 0.0]]}


def call(k: int) -> tuple:
    """The k-th call (k >= 1): extend 300 documents (new and replaced), update_many by tag, or
    delete by tag; every write stamps its documents with k."""
    kind = k % 3
    if kind == 1:
        return ("extend", [{"id": f"d{(k * 37 + j) % 900}", "tag": "abc"[(k + j) % 3], **_values(k)}
                           for j in range(300)])
    if kind == 2:
        return ("update_many", "abc"[k % 3], k)
    return ("delete", "abc"[(k + 1) % 3])


def model_states(n: int) -> list:
    """{id: (tag, stamp)} after 0, 1, ..., n calls."""
    m: dict = {}
    out = [dict(m)]
    for k in range(1, n + 1):
        c = call(k)
        if c[0] == "extend":
            m.update({d["id"]: (d["tag"], k) for d in c[1]})
        elif c[0] == "update_many":
            m.update({i: (t, k) for i, (t, _) in m.items() if t == c[1]})
        else:
            m = {i: v for i, v in m.items() if v[0] != c[1]}
        out.append(dict(m))
    return out


def open_da(storage: str, path: str):
    kind, _ = PERSISTENT[storage]
    return hs.DocumentArray(Doc, storage=kind, path=path, metric="ip")


def run_child(storage: str, path: str) -> None:
    da = open_da(storage, path)
    print("ready", flush=True)
    for k in range(1, 100_000):
        c = call(k)
        if c[0] == "extend":
            da.extend(c[1])
        elif c[0] == "update_many":
            da.update_many({"tag": c[1]}, **_values(c[2]))
        else:
            da.delete(filter={"tag": c[1]})
        print(f"ack {k}", flush=True)


_CHILD = "import sys\nfrom tests.contract.test_vector_kinds_crash import run_child\nrun_child(*sys.argv[1:])\n"


def state(da) -> dict:
    out = {}
    for d in da:
        # the fields of one write travel together: a torn write shows here
        assert d.sv == {d.n: 1.0, d.n + 100_000: 0.5} and d.mv is not None and float(d.mv[0][0]) == d.n, d.id
        out[d.id] = (d.tag, d.n)
    return out


def kill_writer(child_args: list, rng) -> bytes:
    """Runs `python -c *child_args` (a writer printing "ready", then one line per acknowledged
    call), kills it with SIGKILL at a random moment once ready, and gives its stdout."""
    proc = subprocess.Popen([sys.executable, "-c", *child_args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
    for line in iter(proc.stdout.readline, b""):
        if line.strip() == b"ready":
            break
    else:
        raise AssertionError(f"the writer did not start: {proc.communicate()[1][-3000:]}")
    time.sleep(rng.uniform(0.1, 1.0))
    proc.send_signal(signal.SIGKILL)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL, err[-3000:].decode()
    return out


@pytest.mark.parametrize("storage", KILLED)
def test_kill_9_during_writes_of_vector_kinds_keeps_every_acknowledged_call(storage, tmp_path):
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    path = tmp_path / ("c.db" if storage == "sqlite" else "c")
    acked = acks(kill_writer([_CHILD, storage, str(path)], rng))
    n = acked[-1] if acked else 0
    assert acked == list(range(1, n + 1))
    states = model_states(n + 1)
    with open_da(storage, str(path)) as again:
        got = state(again)
        assert got in (states[n], states[n + 1]), (
            f"seed {seed}: {n} calls acknowledged; the reopened collection is neither the state after "
            f"them nor after one more ({len(got)} documents)")
        # the indexes agree with the documents: every document holding values is found by them
        if got:
            stamps = {k: 1.0 for k in set(v for _, v in got.values())}
            assert sorted(again.find(vector={"sv": stamps}, limit=len(got)).ids) == sorted(got)
