"""Several writer processes on one collection, one at a time (issue 32, item 2), on memory and
hnsw with `path=` (hnsw also with vectors_on_disk=True: hnsw-disk, hnsw-rq) and on sqlite.

A writer opened with `lock_timeout=` waits for the writer's lock and then opens, starting from
every write the previous writer acknowledged. Each spawned worker (a process, not a thread: flock
is per open file) appends its name to a shared `order` file while it holds the lock, prints what
it found on opening (count and price sum), then prints an "ack" line after each call returned. The
final collection must equal a serial model that applies the acknowledged calls session after
session in the order the lock was taken, and each session must have started from the model's
state after the sessions before it. One worker killed with kill -9 while it holds the lock
releases it (the kernel drops a dead process's flock) and loses nothing it acknowledged; its
call in flight applies wholly or not at all.
"""
import os
import re
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path
from typing import Optional

import numpy as np
import pytest

import hybridsearch as hs
from tests.conftest import DISK_OPTIONS, STORAGES
from tests.models import matches

ROOT = Path(__file__).resolve().parents[2]
FILE_BACKED = [s for s in ("memory-path", "hnsw-path", "hnsw-disk", "hnsw-rq", "sqlite") if s in STORAGES]
CATEGORIES = ["a", "b", "c"]
CALLS = 4  # per session


class Doc(hs.Document):
    title: hs.Text = ""
    category: Optional[hs.Keyword] = None
    price: int = 0
    embedding: Optional[hs.Vector[4]] = None


def open_da(storage: str, path: str, **options):
    name = {"hnsw-path": "hnsw", "hnsw-disk": "hnsw", "hnsw-rq": "hnsw", "memory-path": "memory"}.get(storage, storage)
    for k, v in DISK_OPTIONS.get(storage, {}).items():
        options.setdefault(k, v)
    return hs.DocumentArray(Doc, storage=name, path=path, **options)


def call(worker: str, session: int, k: int) -> tuple:
    """The k-th call (k >= 1) of a session: an extend of the worker's own documents, or an
    update by condition over everyone's (so the order of the sessions shows in the result)."""
    tag = f"{worker}s{session}k{k}"
    if k % 2:
        rng = np.random.default_rng(zlib.crc32(tag.encode()))
        return ("extend", [dict(id=f"{tag}_{j}", title=f"t {tag}", category=CATEGORIES[(k + j) % 3], price=j,
                                embedding=rng.standard_normal(4).astype(np.float32)) for j in range(5)])
    return ("update_many", {"category": CATEGORIES[(session + k + len(worker)) % 3]},
            {"price": {"a": 100, "b": 200, "c": 300, "v": 400}[worker[0]] + 10 * session + k})


def apply(da, c: tuple) -> None:
    if c[0] == "extend":
        da.extend(c[1])
    else:
        da.update_many(c[1], **c[2])


def apply_model(m: dict, c: tuple) -> None:
    if c[0] == "extend":
        m.update({d["id"]: {k: v for k, v in d.items() if k != "embedding"} for d in c[1]})
    else:
        for d in m.values():
            if matches(d, c[1]):
                d.update(c[2])


def summary(m: dict) -> tuple:
    return len(m), sum(d["price"] for d in m.values())


# ------------------------------------------------------------------ the worker process
def worker(storage: str, path: str, order: str, name: str, sessions: str, calls: str) -> None:
    """Opens, records the lock's acquisition, checks in, writes `calls` calls (-1: until killed),
    closes; `sessions` times."""
    for s in range(int(sessions)):
        da = open_da(storage, path, lock_timeout=30)
        fd = os.open(order, os.O_WRONLY | os.O_APPEND | os.O_CREAT)  # written holding the lock
        os.write(fd, f"{name} {s}\n".encode())
        os.fsync(fd)
        os.close(fd)
        print("start", s, len(da), sum(d.price for d in da), flush=True)
        k = 1
        while int(calls) < 0 or k <= int(calls):
            apply(da, call(name, s, k))
            print(f"ack {s} {k}", flush=True)
            k += 1
        da.close()


def spawn(storage: str, path: str, order: str, name: str, sessions: int, calls: int) -> subprocess.Popen:
    code = "import sys\nfrom tests.contract.test_lock_handover import worker\nworker(*sys.argv[1:])\n"
    return subprocess.Popen([sys.executable, "-c", code, storage, path, order, name, str(sessions), str(calls)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)


def report(out: bytes) -> tuple:
    """({session: (count, price sum) found on opening}, {session: [acknowledged k]})."""
    starts, acks = {}, {}
    for line in out.decode().splitlines():
        parts = line.split()
        if parts[:1] == ["start"]:
            starts[int(parts[1])] = (int(parts[2]), int(parts[3]))
        elif parts[:1] == ["ack"]:
            acks.setdefault(int(parts[1]), []).append(int(parts[2]))
    return starts, acks


def where(storage: str, tmp_path) -> str:
    return str(tmp_path / ("c.db" if storage == "sqlite" else "c"))


def state(da) -> dict:
    """The documents as the model holds them; each vector is checked against the one its extend
    wrote (no call rewrites a vector), so a vector lost across a handover fails here."""
    out = {}
    for d in da:
        worker, session, k, j = re.fullmatch(r"([a-z])s(\d+)k(\d+)_(\d+)", d.id).groups()
        wrote = call(worker, int(session), int(k))[1][int(j)]["embedding"]
        assert np.array_equal(np.asarray(d.embedding, dtype=np.float32), wrote), d.id
        out[d.id] = {"id": d.id, "title": d.title, "category": d.category, "price": d.price}
    return out


def check_serial(path_order: str, reports: dict, final: dict, in_flight: dict) -> None:
    """The sessions in lock order, each starting from the model after those before it; the final
    state the model after all. in_flight: {(worker, session): k} of a call that may or may not
    have applied (a killed worker's): the models with and without it are both followed."""
    with open(path_order) as f:
        sessions = [(w, int(s)) for w, s in (line.split() for line in f.read().splitlines())]
    assert sorted(sessions) == sorted((w, s) for w, (starts, _) in reports.items() for s in starts)
    models = [{}]
    for w, s in sessions:
        starts, acks = reports[w]
        models = [m for m in models if summary(m) == starts[s]]
        assert models, f"session {s} of {w} opened {starts[s]} (count, price sum): not what the sessions " \
                       f"before it in lock order ({sessions}) acknowledged"
        acked = acks.get(s, [])
        assert acked == list(range(1, len(acked) + 1))
        for m in models:
            for k in acked:
                apply_model(m, call(w, s, k))
        if (w, s) in in_flight:
            k = in_flight[(w, s)]
            extra = [{i: dict(d) for i, d in m.items()} for m in models]
            for m in extra:
                apply_model(m, call(w, s, k))
            models += extra
    assert final in models, f"the final state ({summary(final)}) is no serial order of the acknowledged calls"


# ------------------------------------------------------------------ tests
@pytest.mark.parametrize("storage", FILE_BACKED)
def test_writer_processes_take_turns_and_the_result_is_the_serial_order_of_their_calls(storage, tmp_path):
    path, order = where(storage, tmp_path), str(tmp_path / "order")
    procs = {name: spawn(storage, path, order, name, 2, CALLS) for name in ("a", "b", "c")}
    reports = {}
    for name, p in procs.items():
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-3000:].decode()
        reports[name] = report(out)
        assert all(len(reports[name][1].get(s, [])) == CALLS for s in (0, 1))
    with open_da(storage, path) as da:
        final = state(da)
    check_serial(order, reports, final, {})
    assert len(final) == 3 * 2 * (CALLS // 2) * 5


@pytest.mark.parametrize("storage", FILE_BACKED)
def test_a_writer_killed_holding_the_lock_hands_it_over_and_keeps_what_it_acknowledged(storage, tmp_path):
    path, order = where(storage, tmp_path), str(tmp_path / "order")
    victim = spawn(storage, path, order, "v", 1, -1)  # writes until killed
    seen = b""
    while seen.count(b"\nack ") < 3:  # it holds the lock and has acknowledged calls
        chunk = os.read(victim.stdout.fileno(), 4096)
        assert chunk, victim.communicate()[1][-3000:].decode()
        seen += chunk
    others = {name: spawn(storage, path, order, name, 1, CALLS) for name in ("a", "b")}
    time.sleep(0.3)  # they are waiting for the lock meanwhile
    victim.send_signal(signal.SIGKILL)
    out, err = victim.communicate(timeout=60)
    assert victim.returncode == -signal.SIGKILL, err[-3000:].decode()
    reports = {"v": report(seen + out)}
    for name, p in others.items():
        o, e = p.communicate(timeout=120)
        assert p.returncode == 0, e[-3000:].decode()  # each waited, then opened
        reports[name] = report(o)
    acked = reports["v"][1][0]
    with open_da(storage, path) as da:
        final = state(da)
    check_serial(order, reports, final, {("v", 0): acked[-1] + 1})


@pytest.mark.parametrize("storage", FILE_BACKED)
def test_lock_timeout_expiry_names_the_path_the_holder_and_the_timeout(storage, tmp_path):
    path = where(storage, tmp_path)
    with open_da(storage, path) as holder:
        holder.extend([dict(id="x", price=1)])
        started = time.monotonic()
        with pytest.raises(hs.BackendError) as e:
            open_da(storage, path, lock_timeout=0.4)
        waited = time.monotonic() - started
        message = str(e.value)
        assert waited >= 0.4 and path in message and f"process {os.getpid()}" in message \
            and "lock_timeout=0.4" in message, message
        started = time.monotonic()
        with pytest.raises(hs.BackendError) as e:  # the default: refused at once, as before
            open_da(storage, path)
        assert time.monotonic() - started < 0.4 and "lock_timeout" in str(e.value)
        assert holder["x"].price == 1
        holder.update("x", price=2)  # the refused openers took nothing from the holder
    with open_da(storage, path, lock_timeout=5) as again:
        assert again["x"].price == 2


@pytest.mark.parametrize("storage", FILE_BACKED)
def test_lock_timeout_without_a_lock_to_wait_for_is_a_config_error(storage, tmp_path):
    path = where(storage, tmp_path)
    open_da(storage, path).close()
    for options, says in (({"lock_timeout": 1, "read_only": True}, "does not apply to read_only=True"),
                          ({"lock_timeout": -1}, "lock_timeout must be a number between 0"),
                          ({"lock_timeout": "5"}, "lock_timeout must be a number between 0")):
        with pytest.raises(hs.ConfigError, match=says):
            open_da(storage, path, **options)
    if storage != "sqlite":
        with pytest.raises(hs.ConfigError, match="lock_timeout= needs path="):
            hs.DocumentArray(Doc, storage=storage.split("-")[0], lock_timeout=1)
