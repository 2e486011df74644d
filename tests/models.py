"""Plain-Python reference models the suite checks the storages against, and the data and
schemas several test files share.

The models are written from API.md, not from the code they check: nothing here imports
more of hybridsearch than its public names (for the shared Document classes).
"""
import math
import re
from typing import Optional

import numpy as np
import Stemmer

import hybridsearch as hs


class FilterItem(hs.Document):
    """Every kind a filter can name, optional ones included (tests/contract/test_filters.py)."""

    name: hs.Text = ""
    category: hs.Keyword
    brand: Optional[hs.Keyword] = None
    price: int = 0
    discount: Optional[int] = None
    rating: float = 0.0
    in_stock: bool = True
    tags: list = []
    vec: hs.Vector[2]


class TwoTextItem(hs.Document):
    """Two text fields, a keyword, an int and a 4-d vector: the remote engines' own tests
    (tests/storages/remote/test_elasticsearch.py, test_weaviate.py)."""

    title: hs.Text
    body: hs.Text = ""
    tag: hs.Keyword = "a"
    n: int = 0
    v: hs.Vector[4]


class AnnliteItem(hs.Document):
    """The annlite storage's own tests (tests/storages/wrapped/annlite_cases.py): SQL keywords as field names."""

    title: hs.Text = ""
    group: hs.Keyword = "a"          # an SQL keyword as a field name
    order: Optional[int] = None      # another, and optional
    price: float = 0.0
    ok: bool = True
    v: hs.Vector[8]


def matches(doc: dict, flt: dict) -> bool:
    """Reference semantics of the filter language, written independently of hybridsearch.query.filters."""
    for key, cond in flt.items():
        if key == "$and":
            if not all(matches(doc, f) for f in cond):
                return False
        elif key == "$or":
            if not any(matches(doc, f) for f in cond):
                return False
        elif key == "$not":
            if matches(doc, cond):
                return False
        else:
            value = doc.get(key)
            ops = cond if isinstance(cond, dict) and any(str(k).startswith("$") for k in cond) else {"$eq": cond}
            for op, arg in ops.items():
                if not _field_op(value, op, arg):
                    return False
    return True


def _field_op(value, op, arg) -> bool:
    if op == "$exists":
        return (value is not None) == arg
    if op == "$ne":
        return not _field_op(value, "$eq", arg)
    if op == "$nin":
        return not _field_op(value, "$in", arg)
    if value is None:
        return False
    if op == "$eq":
        return value == arg
    if op == "$in":
        return any(value == a for a in arg)
    if op == "$gt":
        return value > arg
    if op == "$gte":
        return value >= arg
    if op == "$lt":
        return value < arg
    if op == "$lte":
        return value <= arg
    raise AssertionError(op)


def exact_scores(X: np.ndarray, q: np.ndarray, metric: str) -> np.ndarray:
    """Scores in float64 exactly as API.md defines them (higher is better)."""
    X = X.astype(np.float64)
    q = q.astype(np.float64)
    if metric == "ip":
        return X @ q
    if metric == "cosine":
        nx = np.linalg.norm(X, axis=1)
        nq = np.linalg.norm(q)
        with np.errstate(invalid="ignore", divide="ignore"):
            s = (X @ q) / (nx * nq)
        return np.nan_to_num(s, nan=0.0)
    return -np.linalg.norm(X - q, axis=1)


def check_topk(got_ids, got_scores, ids, ref_scores, k, tol=1e-4):
    """Asserts got is an exact top-k of ref_scores (indexed like ids), up to ties within tol."""
    ref_scores = np.asarray(ref_scores)
    expected_n = min(k, len(ids))
    assert len(got_ids) == expected_n
    assert len(set(got_ids)) == len(got_ids), "duplicate ids in results"
    pos = {id_: i for i, id_ in enumerate(ids)}
    got_ref = np.array([ref_scores[pos[i]] for i in got_ids])
    # every returned score is the true score of that document
    np.testing.assert_allclose(got_scores, got_ref, rtol=tol, atol=tol)
    # sorted best first
    assert np.all(np.diff(np.asarray(got_scores)) <= tol)
    if expected_n == 0:
        return
    # nothing left out scores better than the worst returned one (beyond ties)
    kth = np.sort(ref_scores)[::-1][expected_n - 1]
    assert got_ref.min() >= kth - tol * max(1.0, abs(kth))


def top_rows(X: np.ndarray, q: np.ndarray, metric: str, k: int, rows=None) -> np.ndarray:
    """The rows (of `rows`, default all) holding the exact top-k for q, best first, ties to the lower row."""
    rows = np.arange(len(X)) if rows is None else np.asarray(rows)
    return rows[np.argsort(-exact_scores(X[rows], q, metric), kind="stable")[:k]]


def clustered(n: int, d: int = 32, centres: int = 50, seed: int = 0, spread: float = 0.35, rng=None) -> np.ndarray:
    """n float32 points around `centres` gaussian centres: data on which a graph index's recall means something."""
    rng = np.random.default_rng(seed) if rng is None else rng
    C = rng.standard_normal((centres, d)).astype(np.float32)
    return (C[rng.integers(0, centres, n)] + spread * rng.standard_normal((n, d))).astype(np.float32)


def same_value(a, b) -> bool:
    """What reading back exactly means for unindexed values: equal, and of the same type at every
    level (1 is not 1.0 nor True, 0.0 is not -0.0, key order of a dict counts)."""
    if type(a) is not type(b):
        return False
    if type(a) is float:
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    if type(a) is dict:
        return same_value(list(a.items()), list(b.items()))
    if type(a) in (list, tuple):
        return len(a) == len(b) and all(map(same_value, a, b))
    return a == b


_STEMMER = Stemmer.Stemmer("english")


def english_tokens(text) -> list:
    """The terms of an ASCII text as API.md describes the default analyzer: lowercased, split into
    runs of letters and digits, each stemmed by Snowball's English stemmer (PyStemmer)."""
    return _STEMMER.stemWords(re.findall(r"[a-z0-9]+", (text or "").lower()))


def fusion_reference(order, lists, fusion, candidates=100, rrf_k=60, weights=None) -> tuple:
    """API.md sections 4, 8 and 10 over any number of lists: (fused, parts), each id -> score,
    parts: list name -> id -> raw part score (NaN where not scored / not matched).

    `order`: every id in insertion order (ties go to the earlier). `lists`: (name, scores,
    every, missing) per list, text first: `scores` maps each document the list matches (after
    the filter) to its raw score; `every`: the list's candidates are all its matches (the lexical
    side of exact=True "sum"/"linear", the first edition), else its top-`candidates`; `missing`:
    the raw score a candidate outside `scores` has on that part (0.0: BM25 without a query term;
    NaN: a document without that vector field, which adds 0). "rrf" sums 1/(rrf_k + rank) over
    each list's top-`candidates` and a part is NaN where the hit is not on that list; "sum" and
    "linear" score the union of the candidates on every part ("linear": each part min-max
    normalised over the candidates, NaN read as 0, times its weight; default equal weights)."""
    pos = {i: n for n, i in enumerate(order)}
    tops = [sorted(scores, key=lambda i: (-scores[i], pos[i]))[:candidates] for _, scores, _, _ in lists]
    names = [name for name, _, _, _ in lists]
    if fusion == "rrf":
        fused: dict = {}
        for top in tops:
            for r, i in enumerate(top, start=1):
                fused[i] = fused.get(i, 0.0) + 1 / (rrf_k + r)
        parts = {name: {i: (scores[i] if i in set(top) else math.nan) for i in fused}
                 for (name, scores, _, _), top in zip(lists, tops)}
        return fused, parts
    cand: set = set()
    for (_, scores, every, _), top in zip(lists, tops):
        cand |= set(scores) if every else set(top)
    parts = {name: {i: scores.get(i, missing) for i in cand} for name, scores, _, missing in lists}
    raw = {name: {i: (0.0 if math.isnan(v) else v) for i, v in p.items()} for name, p in parts.items()}
    if fusion == "sum":
        return {i: sum(raw[name][i] for name in names) for i in cand}, parts
    weights = weights if weights is not None else {name: 1.0 / len(names) for name in names}

    def norm(values):
        if not values:
            return {}
        lo, hi = min(values.values()), max(values.values())
        return {i: (1.0 if x != 0 else 0.0) if hi == lo else (x - lo) / (hi - lo) for i, x in values.items()}

    normed = {name: norm(raw[name]) for name in names}
    return {i: sum(weights.get(name, 0.0) * normed[name][i] for name in names) for i in cand}, parts


def maxsim_scores(blocks, Q: np.ndarray, metric: str) -> np.ndarray:
    """MaxSim as API.md section 10 defines it, in float64: per block, the sum over the rows q of
    Q of the best exact_scores(block, q) (NaN for a block that is None)."""
    return np.array([np.nan if b is None else sum(exact_scores(b, q, metric).max() for q in Q)
                     for b in blocks])


def rerank_model(retrieval: list, scores: list, limit: int, offset: int = 0, min_score=None) -> list:
    """find(rerank=...) as API.md section 11 defines it, over the retrieval ranking's top hits
    `retrieval` (any items, best first) and the reranker's score of each: ordered by score
    descending, ties in retrieval order, then min_score, then the page [offset, offset + limit).
    Returns (item, score) pairs."""
    ranked = sorted(zip(range(len(retrieval)), retrieval, scores), key=lambda t: (-t[2], t[0]))
    kept = [(item, s) for _, item, s in ranked if min_score is None or s >= min_score]
    return kept[offset:offset + limit]


def rrf_rerank_scores(parts: dict, k: int = 60) -> list:
    """hs.RRFReranker's score of each of n hits (parts: list name -> n raw scores, NaN where the
    hit is not on that list): per list, the hits it scored ranked by score descending (ties in
    retrieval order), summing 1 / (k + rank) from rank 1."""
    n = len(next(iter(parts.values()))) if parts else 0
    out = [0.0] * n
    for values in parts.values():
        scored = sorted((i for i in range(n) if not math.isnan(values[i])), key=lambda i: (-values[i], i))
        for rank, i in enumerate(scored, start=1):
            out[i] += 1.0 / (k + rank)
    return out


def linear_rerank_scores(parts: dict, weights: dict = None) -> list:
    """hs.LinearReranker's score of each of n hits: each part (NaN as 0) min-max normalised over
    the hits (a constant part: 1 where nonzero, else 0), weighted (every list equally by default)."""
    names = list(parts)
    weights = weights if weights is not None else {name: 1.0 / len(names) for name in names}
    n = len(parts[names[0]]) if names else 0
    out = [0.0] * n
    for name in names:
        raw = [0.0 if math.isnan(v) else float(v) for v in parts[name]]
        lo, hi = min(raw), max(raw)
        for i, x in enumerate(raw):
            normed = (1.0 if x != 0 else 0.0) if hi == lo else (x - lo) / (hi - lo)
            out[i] += weights.get(name, 0.0) * normed
    return out
