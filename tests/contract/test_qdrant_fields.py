"""What API.md section 10 asks of the qdrant storage beyond the shared contract files
(test_named_vectors.py, test_sparse_vectors.py, test_multi_vectors.py run there too): the
cases where Qdrant's own numbers differ from API.md's, against plain Python models.

Public API only."""
import math
from typing import Optional

import numpy as np
import pytest

import hybridsearch as hs
from tests.conftest import storage_fixture
from tests.contract.test_lexical import best_fields
from tests.models import check_topk, maxsim_scores

storage = storage_fixture(("qdrant", "qdrant-path", "qdrant-client"))


class Tokens(hs.Document):
    tag: hs.Keyword = "a"
    colbert: Optional[hs.MultiVector[2]] = None


def test_l2_multi_vectors_rank_by_minus_the_distances_summed(make_da):
    """Qdrant's MaxSim over Euclid sums squared distances (then a root): for Q = [(1,1), (1,11)],
    "near-far" (distances 0 and 3 -> -3) beats "both-mid" (2 and 2 -> -4) under API.md, and
    loses under Qdrant's sqrt(9) > sqrt(8). The hits follow API.md, scores equal numpy MaxSim."""
    da = make_da(Tokens, metric="l2")
    # (zero rows are refused: every point is shifted by (1, 1), which keeps the distances)
    blocks = {"near-far": [[1, 1], [1, 8]], "both-mid": [[3, 1], [3, 11]], "far": [[10, 10]], "none": None}
    da.extend([{"id": i, "colbert": b} for i, b in blocks.items()])
    Q = np.array([[1, 1], [1, 11]], dtype=np.float32)
    ids = [i for i, b in blocks.items() if b is not None]
    ref = maxsim_scores([np.float32(blocks[i]) for i in ids], Q, "l2")
    for exact in (False, True):
        res = da.find(vector={"colbert": Q}, limit=3, exact=exact)
        assert res.ids == ["near-far", "both-mid", "far"]
        np.testing.assert_allclose(res.scores, ref, rtol=1e-5)
    # filtered: the pre-filter holds, "none" (no value) is never a hit
    da.update("far", tag="b")
    res = da.find(vector={"colbert": Q}, limit=5, filter={"tag": "b"})
    assert res.ids == ["far"]


class Notes(hs.Document):
    title: hs.Text = ""
    description: hs.Text = ""
    splade: hs.SparseVector = {}


def test_a_collection_of_sparse_and_text_fields_only(make_da):
    """No dense field at all: sparse top-k equals the dot-product model, text search still runs."""
    da = make_da(Notes)
    rng = np.random.default_rng(3)
    words = "red green blue cable phone".split()
    docs = [{"id": f"n{i}", "title": " ".join(rng.choice(words, 3)), "description": "plain",
             "splade": {int(k): float(rng.choice([0.5, 1.0, 2.0])) for k in rng.choice(30, 4, replace=False)}}
            for i in range(60)]
    da.extend(docs)
    stored = {d.id: d for d in da}
    q = {1: 1.0, 2: 0.5, 3: 2.0, 4: 1.0}
    model = {i: sum(w * d.splade.get(k, 0.0) for k, w in q.items()) for i, d in stored.items()
             if set(q) & set(d.splade)}
    res = da.find(vector={"splade": q}, limit=10)
    check_topk(res.ids, res.scores, list(model), np.array(list(model.values())), 10)
    want = best_fields(stored, "phone")
    res = da.find(text="phone", limit=10)
    check_topk(res.ids, res.scores, list(want), np.array(list(want.values())), 10)
    # a part score is NaN only where the document holds no sparse value
    da.extend([{"id": "empty", "title": "phone"}])
    res = da.find(text="phone", vector={"splade": q}, fusion="sum", limit=100)
    parts = dict(zip(res.ids, res.part_scores["splade"].tolist()))
    assert math.isnan(parts["empty"])
    for i, s in parts.items():
        if i != "empty":
            assert math.isclose(s, model.get(i, 0.0), rel_tol=1e-5, abs_tol=1e-6), (i, s)


class Texts(hs.Document):
    title: hs.Text = ""
    description: hs.Text = ""


def test_a_repeated_word_one_field_never_holds(make_da):
    """A text query repeating a word is scored term by term per field; on a field no document
    matches, qdrant-client was asked for a term query of limit 0 and refused it (BackendError).
    The hits are the BM25 model's."""
    da = make_da(Texts)
    rng = np.random.default_rng(4)
    words = "red green blue cable phone".split()
    da.extend([{"id": f"t{i}", "title": " ".join(rng.choice(words, 3)), "description": "plain"} for i in range(40)])
    stored = {d.id: d for d in da}
    for text in ("phone phone", "phone red phone", "plain plain"):
        want = best_fields(stored, text)
        res = da.find(text=text, limit=10)
        check_topk(res.ids, res.scores, list(want), np.array(list(want.values())), 10)
