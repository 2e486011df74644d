"""Runs a Plan on a storage: the one place that unions lists, scores the parts, fuses, breaks
ties, pages and applies min_score, for every storage (API.md sections 4, 7 and 8).

The storage answers retrieval primitives (storages/base.py: vector_top, text_top,
text_matches, scores_of, hits_of) inside one `reading()`; nothing here knows how a storage
keeps its data. A find fuses any number of lists (the text and each vector field; API.md
section 10): "sum" and "linear" (third edition) take the union of each list's top-
`candidates`, each candidate scored exactly on every part (0 where it does not match one);
with exact=True the lexical side is every lexical match (the first edition). "rrf": ranks
over the same top lists. `Results.part_scores` carries each hit's raw part scores, one entry
per list.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from hybridsearch.query import fusion
from hybridsearch.query.candidates import Candidates, ScoredPool
from hybridsearch.query.plan import FILTER, HYBRID, SORTED, TEXT, VECTOR, Plan
from hybridsearch.query.rerank import PART, rerank
from hybridsearch.results import Results

_NAN = np.float32("nan")


def execute(storage, plan: Plan) -> Results:
    """The Results of `plan` on `storage` (its page, min_score applied, part_scores aligned)."""
    if plan.rerank is not None:
        return _reranked(storage, plan)
    mode = plan.mode
    if mode == VECTOR:
        return _vector(storage, plan)
    if mode == FILTER:
        return _filter(storage, plan)
    if mode == SORTED:
        return _sorted(storage, plan)
    if mode == TEXT:
        return _text(storage, plan)
    if mode == HYBRID:
        return _hybrid(storage, plan)
    raise ValueError(f"unknown plan mode {mode!r}")  # a bug here, never a user's input


def _reranked(storage, plan: Plan) -> Results:
    """A find with a reranker (API.md section 11): the retrieval ranking's top `rerank.top` hits,
    re-scored and reordered (query/rerank.py); then min_score, limit and offset cut that ranking."""
    if plan.want == 0:
        return Results.empty(_total(storage, plan), plan.labels + (PART,))
    # the retrieval ranking itself: no page, no min_score (they apply to the reranked one)
    retrieval = dataclasses.replace(plan, want=plan.rerank.top, offset=0, min_score=None, rerank=None)
    res = rerank(execute(storage, retrieval), plan.rerank)
    return res.above(plan.min_score)[:plan.want].page(plan.offset)


def _vector(storage, plan: Plan) -> Results:
    (lst,) = plan.vectors
    if plan.want == 0:
        return Results.empty(None, (lst.label,))
    ids, scores, docs = storage.search_vectors(lst.query, plan.want, plan.node, plan.exact, plan.ef, **lst.kwargs)[0]
    return Results(ids, scores, storage.get, docs, None, {lst.label: scores}).above(plan.min_score).page(plan.offset)


def _filter(storage, plan: Plan) -> Results:
    ids, docs = storage.search_filter(plan.node, plan.want)
    node = plan.node
    total = len(ids) if plan.want is None else (lambda: storage.count_matches(node, None))
    return Results(ids, np.zeros(len(ids), dtype=np.float32), storage.get, docs, total, {}).page(plan.offset)


def _sorted(storage, plan: Plan) -> Results:
    ids, scores, docs, total = storage.search_sorted(plan.node, plan.text, plan.sort, plan.want)
    parts = {"text": scores} if plan.text is not None else {}
    return Results(ids, scores, storage.get, docs, total, parts).page(plan.offset)


def _total(storage, plan: Plan):
    """Results.total of a text or hybrid find: counted when read, None where it does not apply."""
    if not plan.counts_total:
        return None
    node, text = plan.node, plan.text
    return lambda: storage.count_matches(node, text)


def _text(storage, plan: Plan) -> Results:
    total = _total(storage, plan)
    if plan.want == 0:
        return Results.empty(total, ("text",))
    with storage.reading():
        lex = storage.text_top(plan.text, plan.want, plan.node)
        ids, docs = storage.hits_of(lex.keys, lex.docs)
    scores = lex.scores
    return Results(ids, scores, storage.get, docs, total, {"text": scores}).above(plan.min_score).page(plan.offset)


def _hybrid(storage, plan: Plan) -> Results:
    """Two lists or more (text and/or vector fields), fused (API.md sections 4, 8 and 10)."""
    labels = plan.labels
    if plan.want == 0:
        return Results.empty(None, labels)
    text = plan.text
    every_match = plan.exact and plan.fusion != "rrf"  # the first edition's lexical side
    with storage.reading():
        pool = None if plan.fusion == "rrf" else storage.scored_pool(plan)
        if pool is not None:  # the engine's own candidates and parts (Storage.scored_pool)
            return _pooled(storage, plan, pool)
        lists = _lists(storage, plan, every_match)
        keys, order, docs, at = union_all(lists)
        n = len(keys)
        if plan.fusion == "rrf":
            fused = fusion.rrf_scores(n, at, plan.rrf_k)
            # each list's raw score where the hit is on it, NaN where it is not
            parts = []
            for found, where in zip(lists, at):
                part = np.full(n, _NAN, dtype=np.float32)
                part[where] = found.scores
                parts.append(part)
        else:
            # every candidate scored exactly on every part
            parts = []
            if text is not None:
                # the lexical list's own BM25; the candidates after it in the union hold no query
                # term when the list is every match, else are scored here
                lex = lists[0]
                part = np.zeros(n, dtype=np.float32)
                part[at[0]] = lex.scores
                if not every_match and n > len(lex.keys):
                    part[len(lex.keys):] = storage.scores_of(keys[len(lex.keys):], "text", text)
                parts.append(part)
            for lst in plan.vectors:
                # NaN where a document holds no vector in the field (named storages): no match
                parts.append(np.asarray(storage.scores_of(keys, "vector", lst.query, **lst.kwargs), dtype=np.float32))
            raw = [np.nan_to_num(p, nan=0.0) for p in parts]  # a part a candidate does not match adds 0
            if plan.fusion == "linear":
                fused = fusion.linear_scores(raw, plan.weights)
            else:
                fused = fusion.sum_scores(raw)
        chosen, scores = fusion.best(fused, plan.want, order)
        ids, hit_docs = storage.hits_of(keys[chosen], None if docs is None else [docs[i] for i in chosen.tolist()])
    out = {label: part[chosen] for label, part in zip(labels, parts)}
    return Results(ids, scores, storage.get, hit_docs, None, out).above(plan.min_score).page(plan.offset)


def _lists(storage, plan: Plan, every_match: bool) -> list:
    """Each list's Candidates, text first: the lexical side before any vector search (a storage
    without a lexical engine refuses first); text + one vector list through hybrid_lists (an
    engine may take both in one request)."""
    c, node = plan.candidates, plan.node
    if plan.text is not None and len(plan.vectors) == 1:
        (lst,) = plan.vectors
        return list(storage.hybrid_lists(plan.text, c, every_match, lst.query, node, plan.exact, plan.ef,
                                         **lst.kwargs))
    out = []
    if plan.text is not None:
        out.append(storage.text_matches(plan.text, node) if every_match else storage.text_top(plan.text, c, node))
    for lst in plan.vectors:
        out.append(storage.vector_top(lst.query, c, node, plan.exact, plan.ef, **lst.kwargs))
    return out


def _pooled(storage, plan: Plan, pool: ScoredPool) -> Results:
    """A hybrid "sum" or "linear" find over candidates an engine scored on both parts (called
    inside the find's `reading()`)."""
    raw = [pool.text, pool.vector]  # NaN: a candidate without the vector (its part score shows NaN)
    held = [np.nan_to_num(p, nan=0.0) for p in raw]  # ... and adds 0, as on the lists' path
    if plan.fusion == "linear":
        fused = fusion.linear_scores(held, plan.weights)
    else:
        fused = fusion.sum_scores(held)
    chosen, scores = fusion.best(fused, plan.want, pool.order)
    docs = None if pool.docs is None else [pool.docs[i] for i in chosen.tolist()]
    ids, hit_docs = storage.hits_of(pool.keys[chosen], docs)
    parts = {label: np.asarray(part, dtype=np.float32)[chosen] for label, part in zip(plan.labels, raw)}
    return Results(ids, scores, storage.get, hit_docs, None, parts).above(plan.min_score).page(plan.offset)


def union_all(lists: list) -> tuple:
    """(keys, order, docs or None, [positions of each list's keys]) of the union of any number of
    lists (each without repeated keys): the first list's keys first, in its order, then each next
    list's new ones."""
    first = lists[0]
    keys, order, docs = first.keys, np.asarray(first.order, dtype=np.int64), first.docs
    at = [np.arange(len(keys), dtype=np.int64)]
    for found in lists[1:]:
        so_far = Candidates(keys, np.empty(0, dtype=np.float32), order, docs)
        keys, order, docs, _, where = union(so_far, found)
        at.append(where)
    return keys, order, docs, at


def union(a: Candidates, b: Candidates) -> tuple:
    """(keys, order, docs or None, positions of a's keys, positions of b's keys) of the union of
    two lists (each without repeated keys): a's keys first, in a's order, then b's new ones."""
    na = len(a.keys)
    if na == 0 or len(b.keys) == 0:
        new = np.arange(len(b.keys), dtype=np.int64)
        in_a = np.zeros(len(b.keys), dtype=bool)
        at_b = np.arange(na, na + len(b.keys), dtype=np.int64)
    else:
        at_b, in_a = _positions_in(a.keys, b.keys)
        new = np.flatnonzero(~in_a)
        at_b = at_b.copy()
        at_b[new] = na + np.arange(len(new), dtype=np.int64)
    keys = np.concatenate([a.keys, b.keys[new]]) if len(new) else a.keys
    order = np.concatenate([a.order, b.order[new]]) if len(new) else a.order
    docs = None
    if a.docs is not None or b.docs is not None:
        da = a.docs if a.docs is not None else [None] * na
        db = b.docs if b.docs is not None else [None] * len(b.keys)
        docs = list(da) + [db[i] for i in new.tolist()]
        for i, at in zip(np.flatnonzero(in_a).tolist(), at_b[in_a].tolist()):
            if docs[at] is None:
                docs[at] = db[i]
    return keys, np.asarray(order, dtype=np.int64), docs, np.arange(na, dtype=np.int64), at_b


def _positions_in(a: np.ndarray, b: np.ndarray) -> tuple:
    """(position in a of each key of b (any value where absent), whether it is in a)."""
    if a.dtype == object or b.dtype == object:
        where = {k: i for i, k in enumerate(a.tolist())}
        pos = np.array([where.get(k, -1) for k in b.tolist()], dtype=np.int64)
        return pos, pos >= 0
    ascending = len(a) < 2 or bool((a[1:] > a[:-1]).all())  # every match comes ascending: no sort
    sorter = None if ascending else np.argsort(a, kind="stable")
    at = np.searchsorted(a, b, sorter=sorter)
    at = np.minimum(at, len(a) - 1)
    pos = at if sorter is None else sorter[at]
    return pos, a[pos] == b
