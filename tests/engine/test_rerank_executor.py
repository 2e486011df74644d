"""find(rerank=...) runs through query/executor.py, the path every storage's finds take, so a
storage (a remote engine included) needs nothing of its own to rerank: checked on a stand-in
storage answering only the executor's retrieval primitive, and by a spy on a real collection
(the vector fast path must not skip the reranker)."""
import numpy as np

import hybridsearch as hs
# internal: the executor and the plan it runs, below the public API, to show the one home of reranking
from hybridsearch.query import executor
from hybridsearch.query.plan import VECTOR, Plan, VectorList
from hybridsearch.query.rerank import Rerank
from tests.models import rerank_model


class StandIn:
    """A storage that only answers search_vectors and get: no rerank of its own."""

    def __init__(self, ids: list, scores: list) -> None:
        self.ids, self.scores, self.asked = ids, np.array(scores, dtype=np.float32), []

    def search_vectors(self, Q, k, node, exact, ef, **field):
        self.asked.append(k)
        return [(self.ids[:k], self.scores[:k], None)]

    def get(self, ids):
        return [{"id": i} for i in ids]


def test_the_executor_reranks_for_any_storage():
    ids = [f"d{i}" for i in range(12)]
    storage = StandIn(ids, list(np.linspace(1.0, 0.0, 12)))

    def by_digit_sum(query, docs):
        return [sum(int(c) for c in d["id"][1:]) % 4 for d in docs]

    plan = Plan(VECTOR, (VectorList("vector", None, np.ones((1, 3), dtype=np.float32)),), want=6, offset=2,
                min_score=1.0, rerank=Rerank(by_digit_sum, 10, "q"))
    res = executor.execute(storage, plan)
    assert storage.asked == [10]  # the retrieval ranking is the reranker's top 10, not limit + offset
    top = ids[:10]
    model = rerank_model(top, by_digit_sum("q", [{"id": i} for i in top]), 4, 2, 1.0)
    assert res.ids == [i for i, _ in model]
    assert list(res.scores) == [s for _, s in model]
    np.testing.assert_array_equal(res.part_scores["vector"], [storage.scores[ids.index(i)] for i in res.ids])


def test_every_find_mode_reranks_through_the_executor(monkeypatch):
    class P(hs.Document):
        title: hs.Text = ""
        v: hs.Vector[3]

    da = hs.DocumentArray(P, storage="memory")
    da.extend([P(id=f"d{i}", title="red lamp" if i % 2 else "blue desk", v=[1.0, i, 0.5]) for i in range(20)])
    calls = []
    real = executor.rerank

    def spy(res, spec):
        calls.append(spec.top)
        return real(res, spec)

    monkeypatch.setattr(executor, "rerank", spy)
    q = np.array([1.0, 0.0, 0.0])
    flip = lambda query, docs: list(range(len(docs)))  # noqa: E731 - reverses the retrieval order
    plain = da.find(vector=q, limit=5)
    res = da.find(vector=q, limit=5, rerank=flip, rerank_top=5, rerank_query="x")  # the fast path's arguments
    assert res.ids == plain.ids[::-1]
    fused = da.find(vector=q, limit=5, rerank=hs.RRFReranker())  # only rerank=: the fast path's call otherwise
    assert fused.ids == plain.ids and "rerank" in fused.part_scores
    np.testing.assert_allclose(fused.scores, [1 / (60 + r) for r in range(1, 6)], rtol=1e-6)
    da.find(text="red", limit=3, rerank=flip)
    da.find(text="red", vector=q, limit=3, rerank=hs.RRFReranker())
    assert calls == [5, 50, 50, 50]
