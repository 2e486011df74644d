"""Reachability of HNSW level 0 after group rewrites (kernels/hs_hnsw.c, the in-degree guarantee).

The invariant: after every add (and every repair) each live node is reachable from the entry
point by a breadth-first search over the level-0 links. The reference is a plain Python BFS over
the links0 array that export() hands out (row = [count, ids...]), independent of the kernel.

The writes that threaten it are those of the FDE graphs of multi-vector fields: every document
written by one call gets the same vector, so groups of nodes are rewritten together, far from
their old place; under ip the group of the smallest norm is never chosen as a neighbour by a walk
and kept only the links that pointed at it before, which relinks and prunes could drop.

Below the public API: the graph's links are the unit under test."""
from collections import deque

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.strategies import composite

from hybridsearch.engine.graph import HnswGraph  # internal: the graph itself is the unit under test

DIM = 8


def unreachable(g):
    """Live nodes no BFS over level-0 links from the entry point reaches (needs no pending removals)."""
    meta, arrays = g.export()
    links0, level = np.array(arrays["links0"]), np.array(arrays["level"])
    live = set(np.flatnonzero(level >= 0).tolist())
    entry = int(meta["entry"])
    if not live:
        return set()
    assert entry in live
    seen, todo = {entry}, deque([entry])
    while todo:
        u = todo.popleft()
        for v in links0[u, 1:1 + links0[u, 0]].tolist():
            if v not in seen:
                seen.add(v)
                todo.append(v)
    return live - seen


@composite
def scenarios(draw):
    return dict(
        seed=draw(st.integers(1, 2**31)),
        n=draw(st.integers(200, 1500)),
        groups=draw(st.integers(2, 12)),
        calls=draw(st.integers(3, 10)),
        m=draw(st.sampled_from([4, 8, 16])),
        spread=draw(st.sampled_from([0.0, 1e-3])),  # identical vectors per group, or near-identical
        removes=draw(st.booleans()),
    )


def run(metric, quant, sc, check):
    """Writes groups of ids together, each group one (near-)same vector far from its old one and of
    its own norm; after each call `check(g, call)`."""
    rng = np.random.default_rng(sc["seed"])
    n, m = sc["n"], sc["m"]
    X = np.zeros((n, DIM), dtype=np.float32)
    g = HnswGraph(DIM, metric, m, 40, sc["seed"], quant)
    g.reserve(n)
    live = np.zeros(n, dtype=bool)
    first = n // 2
    X[:first] = rng.standard_normal((first, DIM)).astype(np.float32)
    g.add(X, np.arange(first, dtype=np.int64), 1)
    live[:first] = True
    check(g, 0)
    for call in range(1, sc["calls"] + 1):
        if sc["removes"] and call % 3 == 0:
            gone = np.flatnonzero(live & (rng.random(n) < 0.2)).astype(np.int64)
            g.remove(X, gone, 1)
            live[gone] = False
            g.repair(X, 1)
            check(g, call)
            continue
        # a call writes every slot of some groups (old and new slots), each group one vector
        label = rng.integers(0, sc["groups"], n)
        chosen = rng.random(sc["groups"]) < 0.5
        chosen[rng.integers(0, sc["groups"])] = True
        slots = np.flatnonzero(chosen[label]).astype(np.int64)
        for gi in np.flatnonzero(chosen):
            mine = slots[label[slots] == gi]
            v = rng.standard_normal(DIM) * (call + gi) * rng.uniform(0.05, 3.0)
            X[mine] = (v + sc["spread"] * rng.standard_normal((len(mine), DIM))).astype(np.float32)
        rng.shuffle(slots)
        g.add(X, slots, 1)
        live[slots] = True
        if g.pending:
            g.repair(X, 1)
        check(g, call)
    return g, live, X


def strict(g, call):
    lost = unreachable(g)
    assert not lost, f"after call {call}: {len(lost)} live nodes unreachable from the entry point"


@pytest.mark.parametrize("quant", ["none", "int8"])
@pytest.mark.parametrize("metric", ["ip", "l2", "cosine"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sc=scenarios())
def test_every_live_node_is_reachable_after_group_rewrites(metric, quant, sc):
    g, live, _ = run(metric, quant, sc, strict)
    assert g.size == int(live.sum())


@pytest.mark.parametrize("metric", ["ip", "cosine"])
def test_reachability_survives_export_and_attach(metric):
    """The in-degree count is rebuilt from the links on attach: rewrites on an attached graph keep
    every node reachable too."""
    sc = dict(seed=0x5EED, n=1200, groups=6, calls=6, m=8, spread=0.0, removes=True)
    g, _, X = run(metric, "none", dict(sc, calls=2), strict)
    meta, arrays = g.export()
    arrays = {k: np.array(a) for k, a in arrays.items()}
    a = HnswGraph.attach(meta, arrays, DIM, metric, 8, 40, "none")
    rng = np.random.default_rng(3)
    live = np.flatnonzero(np.array(arrays["level"]) >= 0).astype(np.int64)
    # every live node rewritten in a few groups, far apart and of very different norms
    for call, part in enumerate(np.array_split(rng.permutation(live), 4), 1):
        X[part] = (rng.standard_normal(DIM) * 10.0 ** (call - 2)).astype(np.float32)
        a.add(X, part, 1)
        strict(a, call)


@pytest.mark.parametrize("metric", ["ip", "l2", "cosine"])
def test_small_group_rewrites_leave_no_node_without_an_in_link(metric):
    """Batches too small for the graph-wide BFS (below 1/16 of the graph) still leave every live
    node but the entry point with a level-0 in-link; a later large batch makes all reachable."""
    rng = np.random.default_rng(5)
    n = 2000
    X = rng.standard_normal((n, DIM)).astype(np.float32)
    g = HnswGraph(DIM, metric, 4, 40, 9, "none")
    g.reserve(n)
    g.add(X, np.arange(n, dtype=np.int64), 1)
    for call in range(40):
        part = rng.choice(n, 20, replace=False).astype(np.int64)
        X[part] = (rng.standard_normal(DIM) * rng.uniform(0.01, 5.0)).astype(np.float32)
        g.add(X, part, 1)
        meta, arrays = g.export()
        links0 = np.array(arrays["links0"])
        pointed = np.zeros(n, dtype=bool)
        for u in range(n):
            pointed[links0[u, 1:1 + links0[u, 0]]] = True
        pointed[int(meta["entry"])] = True
        assert pointed.all(), f"call {call}: {np.flatnonzero(~pointed)[:10]} have no in-link"
    big = rng.permutation(n)[: n // 8].astype(np.int64)
    X[big] = X[big[0]]
    g.add(X, big, 1)
    strict(g, "last")
