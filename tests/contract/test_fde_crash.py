"""kill -9 during writes on a storage="hnsw" collection whose snapshot holds the multi-vector
FDE graph: the reopen maps that graph and replays the log's writes onto it. The reopened
collection is an acknowledged state or one more (the model and the writes of
test_vector_kinds_crash.py), the graph was not built again (stats()["fde_graphs_built"]), its
nodes are exactly the documents, and finds through it score like the exhaustive search.

Public API only."""
import random

import numpy as np

import hybridsearch as hs
from tests.contract.test_crash import acks
from tests.contract.test_vector_kinds_crash import Doc, _values, call, kill_writer, model_states, state

FIRST = 5  # calls 1..4 are written and closed (a snapshot with the FDE graph) before the child runs


def open_da(path: str):
    # exact_max=0: finds walk the FDE graph whatever the collection's size
    return hs.DocumentArray(Doc, storage="hnsw", path=path, metric="ip", exact_max=0)


def apply(da, k: int) -> None:
    c = call(k)
    if c[0] == "extend":
        da.extend(c[1])
    elif c[0] == "update_many":
        da.update_many({"tag": c[1]}, **_values(c[2]))
    else:
        da.delete(filter={"tag": c[1]})


def run_child(path: str) -> None:
    da = open_da(path)
    assert da.stats()["fde_graphs_built"] == 0
    print("ready", flush=True)
    for k in range(FIRST, 100_000):
        apply(da, k)
        print(f"ack {k}", flush=True)


_CHILD = "import sys\nfrom tests.contract.test_fde_crash import run_child\nrun_child(sys.argv[1])\n"


def test_kill_9_during_writes_after_a_snapshot_with_the_fde_graph(tmp_path):
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    path = str(tmp_path / "c")
    with open_da(path) as da:
        for k in range(1, FIRST):
            apply(da, k)
    acked = acks(kill_writer([_CHILD, path], rng))
    n = acked[-1] if acked else FIRST - 1
    assert acked == list(range(FIRST, n + 1))
    states = model_states(n + 1)
    with open_da(path) as again:
        got = state(again)
        assert got in (states[n], states[n + 1]), f"seed {seed}: {n} calls acknowledged"
        st = again.stats()
        assert st["fde_graphs_built"] == 0  # the snapshot's graph, with the log replayed onto it
        assert st["fde_graph_nodes"] == {"mv": len(got)}
        for Q in ([[1.0, 0.0]], [[0.0, 1.0], [1.0, 1.0]], [[-1.0, 0.5]]):
            walked = again.find(vector={"mv": np.float32(Q)}, limit=10)
            exact = again.find(vector={"mv": np.float32(Q)}, limit=10, exact=True)
            np.testing.assert_allclose(walked.scores, exact.scores, rtol=1e-5)
