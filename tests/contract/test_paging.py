"""API.md section 7 on every storage: offset pages, res.total and count(), against a Python model
of the collection (insertion order, the filter as a predicate, a text match as a shared word)."""
import logging
from typing import Optional

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hybridsearch as hs

WORDS = ["red", "blue", "green", "lamp", "desk", "chair"]  # analysed as themselves (no stemming change)


class Item(hs.Document):
    title: hs.Text = ""
    cat: hs.Keyword = ""
    price: int = 0
    v: hs.Vector[4]


def _docs(n: int, seed: int) -> list:
    rng = np.random.default_rng(seed)
    return [{"id": f"d{i}", "title": " ".join(rng.choice(WORDS, 2)), "cat": f"c{i % 3}",
             "price": int(rng.integers(0, 50)), "v": rng.standard_normal(4) + 0.1} for i in range(n)]


NO_TEXT = {"hnswlib", "annlite"}  # no lexical engine: a text find raises UnsupportedError (test_lexical.py)
QDRANT = {"qdrant", "qdrant-path", "qdrant-client"}
# text search without the query syntax (tests/contract/test_query_syntax.py): Weaviate's BM25 has
# no phrases or prefixes; Qdrant's text index has no such query language and no operator="and"
NO_SYNTAX = {"weaviate"} | QDRANT
NO_OPERATOR = QDRANT


def _has_text(storage) -> bool:
    return storage not in NO_TEXT


def _refused(call) -> None:
    """A storage without text search refuses the text part of section 7, saying why."""
    with pytest.raises(hs.UnsupportedError, match="no lexical"):
        call()


@pytest.fixture
def filled(make_da):
    def make(n=60, seed=0):
        da = make_da(Item)
        docs = _docs(n, seed)
        da.extend(docs)
        return da, docs
    return make


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cat=st.sampled_from(["c0", "c1", "c2"]), top=st.integers(0, 50), limit=st.integers(0, 30),
       offset=st.integers(0, 70))
def test_filter_pages_are_slices_and_total_counts_every_match(filled, cat, top, limit, offset):
    da, docs = filled()
    flt = {"cat": cat, "price": {"$lt": top}}
    model = [d["id"] for d in docs if d["cat"] == cat and d["price"] < top]
    res = da.find(filter=flt, limit=limit, offset=offset)
    assert res.ids == model[offset:offset + limit]
    assert res.total == len(model) == da.count(filter=flt)
    assert da.find(filter=flt, limit=None, offset=offset).ids == model[offset:]
    assert da.count() == len(docs)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3), cat=st.sampled_from([None, "c1"]),
       limit=st.integers(1, 20), offset=st.integers(0, 40))
def test_text_pages_are_slices_and_total_counts_documents_with_a_term(filled, storage, words, cat, limit,
                                                                       offset):
    da, docs = filled()
    text = " ".join(words)
    flt = {"cat": cat} if cat else None
    if not _has_text(storage):
        _refused(lambda: da.find(text=text, filter=flt, limit=limit, offset=offset))
        return _refused(lambda: da.count(text=text, filter=flt))
    model = [d for d in docs if set(d["title"].split()) & set(words) and (cat is None or d["cat"] == cat)]
    longer = da.find(text=text, filter=flt, limit=offset + limit)
    page = da.find(text=text, filter=flt, limit=limit, offset=offset)
    assert page.ids == longer.ids[offset:]
    assert list(page.scores) == list(longer.scores[offset:])
    assert page.total == longer.total == len(model) == da.count(text=text, filter=flt)


def test_vector_and_hybrid_pages_are_slices_without_a_total(filled, storage):
    da, docs = filled(80, seed=3)
    q = np.array([0.3, -0.2, 0.9, 0.1])
    longer = da.find(vector=q, limit=40)
    for offset in (0, 1, 7, 24, 25, 30):
        page = da.find(vector=q, limit=5, offset=offset)
        assert page.ids == longer.ids[offset:offset + 5] and page.total is None
    if _has_text(storage):
        longer = da.find(text="red lamp", vector=q, limit=20)
        page = da.find(text="red lamp", vector=q, limit=6, offset=9)
        assert page.ids == longer.ids[9:15] and page.total is None


SECTION_8 = {  # API.md section 8 and the text query syntax: each a text or hybrid find
    "linear": {"text": "red lamp", "vector": [0.3, -0.2, 0.9, 0.1], "fusion": "linear",
               "weights": {"text": 0.3, "vector": 0.7}},
    "text_fields": {"text": "red lamp", "text_fields": {"title": 2.0}},
    "syntax": {"text": '"red lamp" desk -chair'},
    "prefix": {"text": "gre* +lamp"},
    "operator": {"text": "red desk", "operator": "and"},
}


@pytest.mark.parametrize("case", list(SECTION_8))
def test_section_8_and_syntax_pages_are_slices_and_min_score_a_prefix(filled, storage, case):
    da, _ = filled(200, seed=4)
    kwargs = SECTION_8[case]
    if not _has_text(storage):
        with pytest.raises(hs.UnsupportedError):
            da.find(limit=5, **kwargs)
        return
    if (storage in NO_SYNTAX and case in ("syntax", "prefix")) or (storage in NO_OPERATOR and case == "operator"):
        with pytest.raises(hs.UnsupportedError, match="query syntax|not available on storage"):
            da.find(limit=5, **kwargs)
        return
    longer = da.find(limit=30, **kwargs)
    assert len(longer) >= 12, (case, longer.ids)  # enough hits for the pages below to mean something
    page = da.find(limit=7, offset=9, **kwargs)
    assert page.ids == longer.ids[9:16] and list(page.scores) == list(longer.scores[9:16])
    if "vector" not in kwargs:  # a text find counts its matches, as count() with the same options
        counted = {k: v for k, v in kwargs.items() if k in ("text", "text_fields", "operator")}
        assert page.total == longer.total == da.count(**counted) >= len(longer)
    cut = float(longer.scores[11])
    kept = da.find(limit=30, min_score=cut, **kwargs)
    assert kept.ids == [i for i, s in zip(longer.ids, longer.scores) if s >= cut] and kept.total is None


def test_offset_is_checked(filled):
    da, _ = filled(5)
    for bad in (-1, 1.5, "2", True, None):
        with pytest.raises(hs.ConfigError, match="offset"):
            da.find(filter={}, offset=bad)
    assert da.find(filter={}, limit=2, offset=10**30).ids == []  # any size, cut to what exists


# ------------------------------------------------------ writes by condition
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cat=st.sampled_from(["c0", "c1", "c2"]), top=st.integers(0, 50), price=st.integers(-5, 5))
def test_update_many_and_delete_by_filter_match_the_model(filled, cat, top, price):
    da, docs = filled(40, seed=5)
    model = {d["id"]: dict(d) for d in docs}
    flt = {"cat": cat, "price": {"$lt": top}}
    hit = [i for i, d in model.items() if d["cat"] == cat and d["price"] < top]
    assert da.update_many(flt, price=price, title="blue desk") == len(hit)
    for i in hit:
        model[i].update(price=price, title="blue desk")
    assert {d.id: (d.price, d.title) for d in da} == {i: (d["price"], d["title"]) for i, d in model.items()}
    if _has_text(da.storage):
        assert set(da.find(text="desk", limit=100).ids) == {i for i, d in model.items() if "desk" in d["title"]}
    gone = [i for i, d in model.items() if d["price"] == price]
    assert da.delete(filter={"price": price}) == len(gone)
    assert sorted(d.id for d in da) == sorted(set(model) - set(gone))
    assert da.delete(filter={"price": price}) == 0


def test_update_many_validates_before_writing_and_delete_takes_one_form(filled):
    da, docs = filled(20)
    before = {d.id: d.price for d in da}
    with pytest.raises(hs.SchemaError):
        da.update_many({"cat": "c1"}, price="cheap")
    with pytest.raises(hs.SchemaError):
        da.update_many({"cat": "c1"}, price=1, nope=2)
    with pytest.raises(hs.SchemaError):
        da.update_many({"cat": "c1"}, id="x")
    assert {d.id: d.price for d in da} == before
    with pytest.raises(hs.ConfigError):
        da.delete(["d1"], filter={"cat": "c1"})
    with pytest.raises(hs.ConfigError):
        da.delete()
    assert da.delete("d1") == 1 and "d1" not in da and len(da) == 19  # a string is one id
    assert da.update_many({"cat": "nothing"}, price=3) == 0


@pytest.mark.parametrize("everything", [{"$not": {"cat": {"$in": []}}}, {"$or": [{"cat": "c0"}, {"$not": {"cat": "c0"}}]}])
def test_writes_by_a_filter_that_matches_everything_or_nothing(filled, everything):
    """Filters that reduce to "every document" or "none" before they reach the storage (an empty
    $in, a clause and its negation): update_many and delete take them like any other."""
    da, docs = filled(12)
    nothing = {"$not": everything}
    assert da.update_many(nothing, price=7) == 0 and da.delete(filter=nothing) == 0 and len(da) == 12
    assert da.update_many(everything, price=7) == 12
    assert {d.price for d in da} == {7}
    assert da.delete(filter=everything) == 12 and len(da) == 0 and da.find(filter={}).ids == []


# the stats() key counting a storage's durable writes: fsyncs of the log, SQL transactions
DURABLE_WRITES = {"memory": "fsyncs", "hnsw": "fsyncs", "sqlite": "write_transactions"}


def test_writes_by_condition_survive_reopening(tmp_path, caplog):
    for storage, key in DURABLE_WRITES.items():
        path = tmp_path / (storage + (".db" if storage == "sqlite" else ""))
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="hybridsearch"):
            da = hs.DocumentArray(Item, storage=storage, path=path)
            da.extend(_docs(30, seed=2))
            da.close()  # a mapped snapshot, then the writes go to the log
            da = hs.DocumentArray(Item, storage=storage, path=path)
        # every storage with files logs its opening and closing
        assert f"{storage} storage opened" in caplog.text and f"{storage} storage closed" in caplog.text
        assert str(path) in caplog.text and "30 documents" in caplog.text, caplog.text
        n = da.update_many({"cat": "c2"}, price=99, title="green chair")
        d = da.delete(filter={"cat": "c0"})
        writes = da.stats()[key]
        assert 0 < writes <= 2  # one durable write per call, not one per document
        expect = {x.id: (x.price, x.title) for x in da}
        if storage == "sqlite":
            da.close()  # each write was committed; close releases the writer's lock
        del da  # no close() (memory, hnsw): the log alone carries both writes
        import gc
        gc.collect()
        again = hs.DocumentArray(Item, storage=storage, path=path)
        assert {x.id: (x.price, x.title) for x in again} == expect and n == 10 and d == 10
        assert again.count(text="chair green", filter={"price": 99}) == 10
        again.close()


# ------------------------------------------------------------ sort and facets
class Rated(hs.Document):
    title: hs.Text = ""
    cat: Optional[hs.Keyword] = None
    price: Optional[int] = None
    rating: float = 0.0
    ok: bool = False
    v: hs.Vector[4]


def _rated(n: int, seed: int) -> list:
    rng = np.random.default_rng(seed)
    cats = ["Äpfel", "apple", "Zebra", "b", "é"]  # code point order: Zebra < apple < b < Äpfel < é
    return [{"id": f"r{i:02d}", "title": " ".join(rng.choice(WORDS, 2)),
             "cat": None if i % 6 == 0 else cats[int(rng.integers(0, 5))],
             "price": None if i % 7 == 0 else int(rng.integers(0, 6)), "rating": float(rng.integers(0, 3)) / 2,
             "ok": bool(rng.integers(0, 2)), "v": rng.standard_normal(4) + 0.1} for i in range(n)]


def _sorted_model(docs: list, keys: list, score=None) -> list:
    """The API's order: the keys (None last in both directions), then score desc, then insertion."""
    rank = sorted(range(len(docs)), key=lambda i: (-(score[i] if score else 0.0), i))
    for field, direction in reversed(keys):
        have = [i for i in rank if docs[i][field] is not None]
        have.sort(key=lambda i: docs[i][field], reverse=direction == "desc")
        rank = have + [i for i in rank if docs[i][field] is None]
    return [docs[i]["id"] for i in rank]


SORT_KEYS = st.lists(st.tuples(st.sampled_from(["cat", "price", "rating", "ok", "id"]),
                               st.sampled_from(["asc", "desc"])), min_size=1, max_size=3, unique_by=lambda k: k[0])


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(keys=SORT_KEYS, ok=st.sampled_from([None, True]), limit=st.integers(1, 50), offset=st.integers(0, 10))
def test_filter_sort_matches_the_model(make_da, keys, ok, limit, offset):
    da = make_da(Rated)
    docs = _rated(45, seed=8)
    da.extend(docs)
    flt = {"ok": True} if ok else {}
    chosen = [d for d in docs if not ok or d["ok"]]
    res = da.find(filter=flt, sort=keys, limit=limit, offset=offset)
    assert res.ids == _sorted_model(chosen, keys)[offset:offset + limit] and res.total == len(chosen)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(keys=SORT_KEYS, words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=2))
def test_text_sort_orders_every_match_ties_by_bm25(make_da, storage, keys, words):
    da = make_da(Rated)
    docs = _rated(45, seed=9)
    da.extend(docs)
    text = " ".join(words)
    if not _has_text(storage):
        return _refused(lambda: da.find(text=text, sort=keys, limit=None))
    chosen = [d for d in docs if set(d["title"].split()) & set(words)]
    ranked = da.find(text=text, limit=100)
    bm25 = dict(zip(ranked.ids, ranked.scores.tolist()))
    res = da.find(text=text, sort=keys, limit=None)
    want = _sorted_model(chosen, keys, [bm25[d["id"]] for d in chosen])
    assert res.total == len(chosen) and len(res.ids) == len(chosen)
    # equal BM25 scores can differ in their last bits between engines: compare by sort key and score
    same_keys = [tuple(d[f] for f, _ in keys) for d in (next(x for x in docs if x["id"] == i) for i in res.ids)]
    want_keys = [tuple(d[f] for f, _ in keys) for d in (next(x for x in docs if x["id"] == i) for i in want)]
    assert same_keys == want_keys
    assert res.scores == pytest.approx([bm25[i] for i in res.ids], rel=1e-5)


def test_sort_is_checked(filled):
    da, _ = filled(5)
    for bad in ([("price", "up")], [("title", "asc")], [("v", "asc")], [("nope", "asc")], "price", []):
        with pytest.raises(hs.ConfigError):
            da.find(filter={}, sort=bad)
    with pytest.raises(hs.ConfigError, match="vector"):
        da.find(vector=[1, 0, 0, 0], sort=[("price", "asc")])


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(field=st.sampled_from(["cat", "price", "ok"]), ok=st.sampled_from([None, True]),
       word=st.sampled_from([None, "red", "lamp"]), limit=st.integers(0, 6))
def test_facets_match_the_model(make_da, storage, field, ok, word, limit):
    da = make_da(Rated)
    docs = _rated(45, seed=10)
    da.extend(docs)
    if word and not _has_text(storage):
        return _refused(lambda: da.facets(field, text=word, limit=limit))
    flt = {"ok": True} if ok else None
    chosen = [d for d in docs if (not ok or d["ok"]) and (word is None or word in d["title"].split())]
    counts: dict = {}
    for d in chosen:
        if d[field] is not None:
            counts[d[field]] = counts.get(d[field], 0) + 1
    want = sorted(counts.items(), key=lambda p: (-p[1], p[0]))[:limit]
    assert da.facets(field, filter=flt, text=word, limit=limit) == want
    ranges = [(None, 2), (2, 4), (4, None), (10, 20)]
    assert da.facets("price", ranges=ranges, filter=flt, text=word) == [
        ((lo, hi), sum(1 for d in chosen if d["price"] is not None and (lo is None or d["price"] >= lo)
                       and (hi is None or d["price"] < hi))) for lo, hi in ranges]


def test_facets_are_checked(filled):
    da, _ = filled(5)
    for field, ranges in (("title", None), ("v", None), ("nope", None), ("cat", [(0, 1)]),
                          ("price", [(0,)]), ("price", [(True, 2)]), ("price", [(float("nan"), 1)]), ("price", "0-1")):
        with pytest.raises(hs.ConfigError):
            da.facets(field, ranges=ranges)
