"""The hnsw storage's multi-vector candidate graph (the graph over MUVERA encodings, API.md
section 10) across close and reopen: it is saved with the snapshot and mapped on open, not
built again (stats()["fde_graphs_built"] stays 0), and the reopened collection answers every
multi-vector find exactly as the collection did before closing, equal to exhaustive MaxSim
(tests/models.py maxsim_scores) on data small enough for recall 1; writes after the reopen
follow the mapped graph and survive the next reopen. stats()["bytes"] counts the sparse index,
the token stores and the FDE graph.

Public API only."""
from typing import Optional

import numpy as np
import pytest

import hybridsearch as hs
from hybridsearch.bench.multivectors import colbert_like  # ColBERT-like data (topics + noise)
from tests.models import maxsim_scores


class Page(hs.Document):
    tag: hs.Keyword = "a"
    colbert: Optional[hs.MultiVector[16]] = None
    other: Optional[hs.MultiVector[8]] = None


DOCS, QUERIES = colbert_like(300, 6, dim=16, tokens=(4, 12), query_tokens=6, topics=40, seed=5)
OTHER, OTHER_Q = colbert_like(300, 3, dim=8, tokens=(3, 6), query_tokens=4, topics=20, seed=6)


def open_at(path):
    # exact_max=0: the candidate graph serves every find, whatever the collection's size
    return hs.DocumentArray(Page, storage="hnsw", path=path, exact_max=0,
                            metric={"colbert": "cosine", "other": "ip"})


def answers(da) -> list:
    out = []
    for flt in (None, {"tag": "b"}):
        for Q in QUERIES:
            r = da.find(vector={"colbert": Q}, limit=10, filter=flt)
            out.append((r.ids, [float(s) for s in r.scores]))
        for Q in OTHER_Q:
            r = da.find(vector={"other": Q}, limit=5)
            out.append((r.ids, [float(s) for s in r.scores]))
    return out


def exhaustive(held: dict, Q, metric: str, k: int) -> tuple:
    ids = sorted(held)
    ref = maxsim_scores([held[i] for i in ids], Q, metric)
    order = np.argsort(-ref, kind="stable")[:k]
    return [ids[j] for j in order], ref[order]


def fill(da) -> tuple:
    da.extend([{"id": f"d{i:03d}", "tag": "ab"[i % 2], "colbert": b if i % 7 else None,
                "other": OTHER[i] if i % 3 else None} for i, b in enumerate(DOCS)])
    da.delete([f"d{i:03d}" for i in range(0, 300, 11)])
    da.update("d005", colbert=QUERIES[0])
    held = {f"d{i:03d}": b for i, b in enumerate(DOCS) if i % 7 and i % 11}
    held["d005"] = np.float32(QUERIES[0])
    other = {f"d{i:03d}": b for i, b in enumerate(OTHER) if i % 3 and i % 11}
    return held, other


def assert_exhaustive(da, held: dict, other: dict) -> None:
    """Recall 1 on this small data: the hits are the exhaustive top-k, with its scores."""
    for Q in QUERIES:
        r = da.find(vector={"colbert": Q}, limit=10)
        ids, scores = exhaustive(held, Q, "cosine", 10)
        assert set(r.ids) == set(ids)
        np.testing.assert_allclose(r.scores, scores, rtol=1e-4, atol=1e-4)
    for Q in OTHER_Q:
        r = da.find(vector={"other": Q}, limit=5)
        ids, scores = exhaustive(other, Q, "ip", 5)
        assert set(r.ids) == set(ids)
        np.testing.assert_allclose(r.scores, scores, rtol=1e-4, atol=1e-4)


def test_reopen_maps_the_fde_graphs_and_answers_exactly_as_before(tmp_path):
    da = open_at(tmp_path / "c")
    held, other = fill(da)
    assert da.stats()["fde_graph_nodes"] == {"colbert": len(held), "other": len(other)}
    before = answers(da)
    assert_exhaustive(da, held, other)
    da.close()
    with open_at(tmp_path / "c") as again:
        st = again.stats()
        assert st["fde_graphs_built"] == 0  # mapped from the snapshot, not encoded and linked again
        assert st["fde_graph_nodes"] == {"colbert": len(held), "other": len(other)}
        assert answers(again) == before  # same ids, same scores, same order
        assert_exhaustive(again, held, other)
        # writes after the reopen change the mapped graph in place (copy-on-write)
        again.delete(["d001", "d002"])
        again.update("d004", colbert=None)
        again.extend([{"id": "new", "colbert": QUERIES[1], "other": OTHER_Q[0]}])
        for i in ("d001", "d002"):
            held.pop(i, None)
            other.pop(i, None)
        held.pop("d004")
        assert again.stats()["fde_graph_nodes"] == {"colbert": len(held) + 1, "other": len(other) + 1}
        held["new"], other["new"] = np.float32(QUERIES[1]), np.float32(OTHER_Q[0])
        assert again.find(vector={"colbert": QUERIES[1]}, limit=1).ids == ["new"]
        assert_exhaustive(again, held, other)
        after_writes = answers(again)
    with open_at(tmp_path / "c") as third:
        assert third.stats()["fde_graphs_built"] == 0
        assert third.stats()["fde_graph_nodes"] == {"colbert": len(held), "other": len(other)}
        assert answers(third) == after_writes
        assert_exhaustive(third, held, other)


def test_a_collection_without_multi_vector_documents_builds_nothing_and_reopens(tmp_path):
    with open_at(tmp_path / "c") as da:
        da.extend([{"id": "x", "tag": "b"}])
    with open_at(tmp_path / "c") as again:
        st = again.stats()
        assert st["fde_graphs_built"] == 0 and st["fde_graph_nodes"] == {"colbert": 0, "other": 0}
        assert again.find(vector={"colbert": QUERIES[0]}, limit=3).ids == []
        again.extend([{"id": "y", "colbert": QUERIES[0]}])
        assert again.find(vector={"colbert": QUERIES[0]}, limit=3).ids == ["y"]


class Kinds(hs.Document):
    text: hs.Text = ""
    sv: hs.SparseVector = {}
    mv: Optional[hs.MultiVector[16]] = None


@pytest.mark.parametrize("storage", ["memory", "hnsw", "sqlite"])
def test_stats_bytes_count_the_sparse_index_and_the_token_stores(storage, tmp_path):
    """Lower bounds from what the documents hold: a sparse entry is at least a 4-byte key and a
    4-byte weight, a token row d float32s; on hnsw the FDE graph holds an encoding of
    FdeParams' 5,120 float32s per document."""
    opts = {"path": str(tmp_path / "c.db")} if storage == "sqlite" else {}
    with hs.DocumentArray(Kinds, storage=storage, **opts) as da:
        empty = da.stats()["bytes"]
        blocks = DOCS[:50]
        da.extend([{"id": str(i), "sv": {i: 1.0, i + 1000: 2.0, 7: 0.5}, "mv": b} for i, b in enumerate(blocks)])
        got = da.stats()["bytes"]
        assert got["sparse"] >= 3 * 50 * 8 and got["sparse"] > empty["sparse"]
        assert got["multivectors"] >= sum(b.nbytes for b in blocks) and got["multivectors"] > empty["multivectors"]
        if storage == "hnsw":
            assert got["fde_graph"] >= 50 * 5120 * 4


def test_find_batched_walks_the_fde_graph_like_single_finds(tmp_path):
    """One walk for the whole batch (FdeGraph.candidates_batch) gives what each find gives,
    with and without a filter."""
    with open_at(tmp_path / "c") as da:
        fill(da)
        for flt in (None, {"tag": "b"}):
            many = da.find_batched(vectors={"colbert": QUERIES}, limit=10, filter=flt)
            one = [da.find(vector={"colbert": Q}, limit=10, filter=flt) for Q in QUERIES]
            assert [(r.ids, list(r.scores)) for r in many] == [(r.ids, list(r.scores)) for r in one]


class Mixed(hs.Document):
    emb: hs.Vector[8]
    colbert: Optional[hs.MultiVector[16]] = None


def test_reopen_with_another_m_rebuilds_the_fde_graph(tmp_path):
    """The FDE graph is derived from the tokens: a collection holding only multi-vector fields
    reopens with another m (the graph built again with it), answering as exhaustive MaxSim. With
    a dense field, the dense graph's own refusal names the m it was built with."""
    with open_at(tmp_path / "c") as da:
        held, other = fill(da)
    with hs.DocumentArray(Page, storage="hnsw", path=tmp_path / "c", exact_max=0, m=32,
                          metric={"colbert": "cosine", "other": "ip"}) as again:
        st = again.stats()
        assert st["fde_graphs_built"] == 2
        assert st["fde_graph_nodes"] == {"colbert": len(held), "other": len(other)}
        assert_exhaustive(again, held, other)
    # closed without a write, the rebuilt graphs were saved: the next open with m=32 maps them
    with hs.DocumentArray(Page, storage="hnsw", path=tmp_path / "c", exact_max=0, m=32,
                          metric={"colbert": "cosine", "other": "ip"}) as third:
        assert third.stats()["fde_graphs_built"] == 0
        assert_exhaustive(third, held, other)
    rng = np.random.default_rng(0)
    with hs.DocumentArray(Mixed, storage="hnsw", path=tmp_path / "m", metric="cosine") as da:
        da.extend([{"id": str(i), "emb": rng.standard_normal(8).astype(np.float32), "colbert": b}
                   for i, b in enumerate(DOCS[:40])])
    with pytest.raises(hs.BackendError, match=r"built with m=16; open it with that m"):
        hs.DocumentArray(Mixed, storage="hnsw", path=tmp_path / "m", metric="cosine", m=32)
