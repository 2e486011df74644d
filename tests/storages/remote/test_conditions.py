"""API.md section 7 on Elasticsearch / OpenSearch done by the engine, against real nodes on
127.0.0.1: counts are one `_count`, facets one aggregation, sorted finds the engine's `sort`,
writes by condition one `_delete_by_query` / `_update_by_query` (the proxy in front of the node
shows the requests). The results themselves are also held to Python models here; the shared
contract suite (tests/contract/test_paging.py) checks them on every storage.

Elasticsearch's test node is the minimal integ-test distribution, which has no reindex module
(so no _delete_by_query / _update_by_query) and no painless: there the tests check that the
storage asked once, then wrote through bulk requests. A node that has them (OpenSearch's test
node, any regular Elasticsearch) runs the by-query tests.
"""
import json
import threading
import time
import urllib.parse
from collections import Counter
from typing import Optional

import numpy as np
import pytest

import hybridsearch as hs
from hybridsearch.storages.remote.elasticsearch import storage as S
from tests.storages.remote.proxy import Forward
from tests.storages.remote.test_elasticsearch import client, open_da, proxy, remote  # noqa: F401 (fixtures)


class Shop(hs.Document):
    title: hs.Text = ""
    cat: Optional[hs.Keyword] = None
    price: Optional[int] = None
    rating: float = 0.0
    ok: bool = False
    notes: dict = {}
    v: hs.Vector[4]


CATS = ["Äpfel", "apple", "Zebra", "b", "é", "ß"]  # code point order: Zebra < apple < b < ß < Äpfel < é
WORDS = ["red", "blue", "lamp", "desk"]


def shop(n: int, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    return [{"id": f"s{i:03d}", "title": " ".join(rng.choice(WORDS, 2)),
             "cat": None if i % 7 == 0 else CATS[int(rng.integers(0, len(CATS)))],
             "price": None if i % 5 == 0 else int(rng.integers(0, 20)), "rating": float(rng.integers(0, 4)) / 2,
             "ok": bool(rng.integers(0, 2)), "v": rng.standard_normal(4) + 0.1} for i in range(n)]


def facet_model(docs: list, field: str, limit: int) -> list:
    counts = Counter(d[field] for d in docs if d[field] is not None)
    return sorted(counts.items(), key=lambda p: (-p[1], p[0]))[:limit]


def sorted_model(docs: list, keys: list) -> list:
    """API.md's order of a filter-only sorted find: keys (None last both ways), then insertion."""
    rank = list(range(len(docs)))
    for field, direction in reversed(keys):
        have = sorted((i for i in rank if docs[i][field] is not None), key=lambda i: docs[i][field],
                      reverse=direction == "desc")
        rank = have + [i for i in rank if docs[i][field] is None]
    return [docs[i]["id"] for i in rank]


def since(proxy, n: int) -> list:
    """(method, path without the query, JSON body or None) of the requests after the n-th."""
    out = []
    for r in proxy.requests[n:]:
        path = urllib.parse.urlsplit(r.path).path
        out.append((r.method, path, json.loads(r.body) if r.body and not path.endswith("_bulk") else None))
    return out


def query_params(req) -> dict:
    """The query parameters of a by-query request; `conflicts` may travel in the body instead
    (the Elasticsearch 8 client puts it there for _update_by_query; both engines take either)."""
    params = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(req.path).query))
    body = json.loads(req.body) if req.body else {}
    if "conflicts" in body:
        params["conflicts"] = body["conflicts"]
    return params


@pytest.fixture
def by_query(remote, client):
    """Whether the node has _delete_by_query / _update_by_query and painless (its modules)."""
    info = client.nodes.info(metric="plugins")
    modules = [{m["name"] for m in node.get("modules", [])} for node in dict(info)["nodes"].values()]
    return all({"reindex", "lang-painless"} <= names for names in modules)


@pytest.fixture
def filled(open_da, proxy):
    def make(n=60, seed=0, **options):
        da = open_da(Shop, hosts=proxy.url, **options)
        docs = shop(n, seed)
        da.extend(docs)
        return da, docs
    return make


# ------------------------------------------------------------------- count
def test_count_is_one_count_request_with_the_text_query_of_find(filled, proxy):
    da, docs = filled()
    n = len(proxy.requests)
    assert da.count(filter={"ok": True}) == sum(d["ok"] for d in docs)
    assert da.count(text="lamp desk", filter={"cat": "b"}) == sum(
        1 for d in docs if {"lamp", "desk"} & set(d["title"].split()) and d["cat"] == "b")
    sent = since(proxy, n)
    assert [(m, p.rsplit("/", 1)[-1]) for m, p, _ in sent] == [("POST", "_count"), ("POST", "_count")]
    must = sent[1][2]["query"]["bool"]["must"]  # the very query find(text=) runs
    assert must == [{"multi_match": {"query": "lamp desk", "fields": ["title"], "type": "best_fields"}}]
    assert da.count(text="lamp desk", filter={"cat": "b"}) == da.find(text="lamp desk", filter={"cat": "b"}).total


# ------------------------------------------------------------------ facets
@pytest.mark.parametrize("field", ["cat", "ok", "price"])
def test_facets_are_one_aggregation_request(filled, proxy, field):
    da, docs = filled()
    n = len(proxy.requests)
    got = da.facets(field, filter={"rating": {"$gte": 0.5}}, limit=4)
    assert got == facet_model([d for d in docs if d["rating"] >= 0.5], field, 4)
    (method, path, body), = since(proxy, n)  # one request, no document fetched
    assert path.endswith("/_search") and body["size"] == 0
    assert body["aggs"]["f"]["terms"] == {"field": field, "size": 4,
                                          "order": [{"_count": "desc"}, {"_key": "asc"}]}
    assert all(type(v) is {"cat": str, "ok": bool, "price": int}[field] for v, _ in got)


def test_keyword_facets_order_ties_by_code_point(filled):
    da, docs = filled(90, seed=3)
    every = da.facets("cat", limit=100)
    assert every == facet_model(docs, "cat", 100)
    same = [v for v, c in every if c == every[0][1]]
    assert same == sorted(same)  # Python's str order is code point order, like the engine's bytes


def test_facets_limit_zero_asks_nothing_and_ranges_keep_their_order(filled, proxy):
    da, docs = filled(50, seed=4)
    n = len(proxy.requests)
    assert da.facets("cat", limit=0) == [] and da.facets("ok", text="lamp", limit=0) == []
    assert len(proxy.requests) == n
    ranges = [(10, None), (None, 5), (5, 10), (3, 12), (100, 200), (None, None), (2.5, 7.5)]
    got = da.facets("price", ranges=ranges, text="red")
    chosen = [d for d in docs if "red" in d["title"].split() and d["price"] is not None]
    assert got == [((lo, hi), sum(1 for d in chosen if (lo is None or d["price"] >= lo)
                                  and (hi is None or d["price"] < hi))) for lo, hi in ranges]
    (_, _, body), = since(proxy, n)
    assert "range" in body["aggs"]["f"] and body["size"] == 0
    assert got[4] == ((100, 200), 0)  # zero counts kept
    assert da.facets("rating", ranges=[(0.5, 1.0), (1.0, None)]) == [
        ((0.5, 1.0), sum(1 for d in docs if 0.5 <= d["rating"] < 1.0)),
        ((1.0, None), sum(1 for d in docs if d["rating"] >= 1.0))]


def test_facets_over_several_shards_stay_exact(open_da, proxy):
    """A terms aggregation merges each shard's top values; when the engine reports a possible
    error the counts come from a composite aggregation, exact on any number of shards."""
    da = open_da(Shop, hosts=proxy.url, shards=3)
    rng = np.random.default_rng(5)
    values = [f"k{int(x):02d}" for x in rng.zipf(1.3, 600) % 80]
    docs = [{"id": f"x{i}", "cat": v, "v": rng.standard_normal(4)} for i, v in enumerate(values)]
    da.extend(docs)
    n = len(proxy.requests)
    for limit in (1, 3, 50):
        assert da.facets("cat", limit=limit) == facet_model(docs, "cat", limit)
    aggs = [body["aggs"]["f"] for _, p, body in since(proxy, n)]
    assert "terms" in aggs[0] and any("composite" in a for a in aggs)


# -------------------------------------------------------------------- sort
def test_sort_is_the_engines_sort_with_missing_last_and_insertion_order(filled, proxy):
    da, docs = filled()
    keys = [("cat", "desc"), ("price", "asc")]
    n = len(proxy.requests)
    res = da.find(filter={"ok": True}, sort=keys, limit=7, offset=3)
    chosen = [d for d in docs if d["ok"]]
    assert res.ids == sorted_model(chosen, keys)[3:10] and res.total == len(chosen)
    (_, path, body), = since(proxy, n)  # the page and the total in one request
    assert path.endswith("/_search") and body["size"] == 10 and body["track_total_hits"] is True
    assert body["sort"] == [{"cat": {"order": "desc", "missing": "_last"}},
                            {"price": {"order": "asc", "missing": "_last"}}, {"hs_seq": "asc"}, {"hs_id": "asc"}]


def test_sort_by_id(filled):
    da, docs = filled(40, seed=6)
    ids = sorted(d["id"] for d in docs)
    assert da.find(filter={}, sort=[("id", "desc")], limit=None).ids == ids[::-1]
    assert da.find(filter={"ok": False}, sort=[("id", "asc")], limit=5).ids == [
        i for i in ids if not next(d for d in docs if d["id"] == i)["ok"]][:5]


def test_sorted_pages_run_through_search_after(filled, monkeypatch):
    """Pages of 7 hits (not 5,000) so that every page boundary falls on missing values and ties."""
    monkeypatch.setattr(S, "PAGE", 7)
    da, docs = filled(45, seed=7)
    for keys in ([("cat", "asc")], [("price", "desc"), ("cat", "asc")], [("ok", "asc"), ("rating", "desc")]):
        want = sorted_model(docs, keys)
        assert da.find(filter={}, sort=keys, limit=None).ids == want
        assert da.find(filter={}, sort=keys, limit=9, offset=30).ids == want[30:39]


def test_text_sort_keeps_bm25_scores_and_every_match(filled, proxy):
    da, docs = filled(50, seed=8)
    ranked = da.find(text="lamp", limit=100)
    res = da.find(text="lamp", sort=[("price", "asc")], limit=None)
    assert sorted(res.ids) == sorted(ranked.ids) and res.total == len(ranked.ids) == da.count(text="lamp")
    bm25 = dict(zip(ranked.ids, ranked.scores.tolist()))
    assert res.scores == pytest.approx([bm25[i] for i in res.ids], rel=1e-6)
    prices = [next(d for d in docs if d["id"] == i)["price"] for i in res.ids]
    have = [p for p in prices if p is not None]
    assert have == sorted(have) and prices[len(have):] == [None] * (len(prices) - len(have))
    body = json.loads(proxy.seen("/_search")[-1].body)
    assert body["sort"][1] == {"_score": "desc"} and body["track_scores"] is True


# ------------------------------------------------------- writes by condition
def test_delete_by_filter_returns_the_count_and_is_visible_on_return(filled, proxy, by_query):
    da, docs = filled(40, refresh="wait_for")
    n = len(proxy.requests)
    gone = [d["id"] for d in docs if d["cat"] == "b" or d["price"] is None]
    assert da.delete(filter={"$or": [{"cat": "b"}, {"$not": {"price": {"$exists": True}}}]}) == len(gone)
    assert len(da) == 40 - len(gone) and not set(gone) & {d.id for d in da}
    assert da.count(filter={"cat": "b"}) == 0
    sent = proxy.requests[n:]
    dbq = [r for r in sent if r.path.split("?")[0].endswith("/_delete_by_query")]
    assert len(dbq) == 1  # asked once (a node without the endpoint says so, and bulk does it)
    assert query_params(dbq[0]) == {"conflicts": "proceed", "refresh": "true"}
    bulk = [r for r in sent if r.path.split("?")[0].endswith("/_bulk")]
    assert bool(bulk) == (not by_query)  # no document travels unless the node lacks the endpoint
    n = len(proxy.requests)
    assert da.delete(filter={"cat": "nothing"}) == 0
    again = [r.path.split("?")[0].rsplit("/", 1)[-1] for r in proxy.requests[n:]]
    assert ("_delete_by_query" in again) == by_query  # a node without it is not asked twice


def test_update_many_is_one_update_by_query(filled, proxy, by_query):
    da, docs = filled(40)
    n = len(proxy.requests)
    hit = [d["id"] for d in docs if d["ok"]]
    assert da.update_many({"ok": True}, title="green chair", price=7, cat=None) == len(hit)
    sent = proxy.requests[n:]
    ubq = [r for r in sent if r.path.split("?")[0].endswith("/_update_by_query")]
    assert len(ubq) == 1 and query_params(ubq[0]) == {"conflicts": "proceed", "refresh": "true"}
    script = json.loads(ubq[0].body)["script"]
    assert script["params"] == {"values": {"title": "green chair", "price": 7}, "drop": ["cat"], "present": ["price"]}
    if by_query:  # no document travels: no bulk, no per-document update
        assert not [r for r in sent if r.path.split("?")[0].endswith(("/_bulk", "/_mget"))]
    # the text field was analysed again, the removed keyword is gone from $exists and facets
    assert sorted(da.find(text="chair", limit=100).ids) == sorted(hit) == sorted(
        da.find(filter={"price": 7, "$not": {"cat": {"$exists": True}}}, limit=None).ids)
    assert da.facets("cat", filter={"ok": True}) == []
    assert all(d.cat is None and d.title == "green chair" for d in da if d.ok)
    # values the documents already hold, then others: on OpenSearch 3.5 a script noop at this
    # point left the documents unfetchable (query.UPDATE_SCRIPT), so the finds below are the check
    assert da.update_many({"ok": True}, price=7) == len(hit)
    assert da.update_many({"ok": True}, cat="Zebra") == len(hit)
    assert da.count(filter={"cat": {"$exists": True}, "ok": True}) == len(hit)
    assert sorted(da.find(filter={"cat": "Zebra", "price": 7}, limit=None).ids) == sorted(hit)
    assert {d.id for d in da.find(text="chair", limit=100).docs if d.cat == "Zebra"} == set(hit)


def test_update_many_of_an_unindexed_field_rewrites_the_documents_in_bulk(filled, proxy):
    da, docs = filled(20)
    n = len(proxy.requests)
    assert da.update_many({"ok": True}, notes={"sale": [1, 2]}, price=3) == sum(d["ok"] for d in docs)
    sent = [r.path.split("?")[0].rsplit("/", 1)[-1] for r in proxy.requests[n:]]
    assert "_update_by_query" not in sent and "_bulk" in sent  # one JSON string per document: no script
    for d in da:
        assert (d.notes, d.price) == (({"sale": [1, 2]}, 3) if d.ok else ({}, next(x for x in docs
                                                                                  if x["id"] == d.id)["price"]))


def test_a_document_changed_during_update_many_is_updated_by_a_second_run(filled, proxy, remote, client, by_query):
    """A real version conflict: the node processes the update 5 documents a second, and another
    writer changes documents of the last batches meanwhile. The first run skips them
    (conflicts=proceed), the second updates them; their other change is kept."""
    if not by_query:
        pytest.skip("the node has no _update_by_query")
    da, docs = filled(20)
    index = da.stats()["index"]
    first = [True]

    def throttled(req):
        if req.path.split("?")[0].endswith("/_update_by_query") and first[0]:
            first[0] = False
            threading.Thread(target=other_writer, daemon=True).start()
            sep = "&" if "?" in req.path else "?"
            return Forward(path=req.path + sep + "scroll_size=5&requests_per_second=5")
        return None

    def other_writer():
        time.sleep(0.4)  # after the node took its snapshot, before it reaches the last batches
        for i in range(15, 20):
            client.update(index=index, id=f"s{i:03d}", body={"doc": {"title": "moved"}})

    proxy.rule = throttled
    assert da.update_many({}, price=99) == 20
    proxy.rule = None
    assert len(proxy.seen("/_update_by_query")) == 2
    got = {d.id: (d.price, d.title) for d in da}
    assert all(p == 99 for p, _ in got.values())
    assert [got[f"s{i:03d}"][1] for i in range(15, 20)] == ["moved"] * 5


def test_failures_in_a_by_query_answer_are_a_backend_error(filled, proxy, by_query):
    """The engine's own failure answer: the proxy changes a value so that the node refuses the
    rewritten documents (a mapping error), as a bug or a concurrent mapping change would."""
    if not by_query:
        pytest.skip("the node has no _update_by_query")
    da, _ = filled(10)
    before = sorted((d.id, d.price) for d in da)

    def bad_value(req):
        if not req.path.split("?")[0].endswith("/_update_by_query"):
            return None
        body = json.loads(req.body)
        body["script"]["params"]["values"]["price"] = "not a number"
        return Forward(body=json.dumps(body).encode())

    proxy.rule = bad_value
    with pytest.raises(hs.BackendError, match=r"(?s)status 400.*failures.*0 documents were updated before it "
                                              r"stopped.*no multi-document transaction"):
        da.update_many({}, price=5)
    proxy.rule = None
    assert sorted((d.id, d.price) for d in da) == before


def test_opensearch_indexes_keep_vectors_in_source_and_derived_ones_use_bulk(open_da, proxy, remote, client):
    """OpenSearch 3.5 with k-NN derived source: after a scroll (as _update_by_query runs) over
    documents written together, the documents left in place cannot be fetched any more. New
    indexes turn it off; on an index that has it (the proxy creates one, as another tool
    would), writes by condition go through bulk requests."""
    storage, url = remote
    if storage != "opensearch":
        pytest.skip("an OpenSearch k-NN setting")
    major = int(client.info()["version"]["number"].split(".")[0])
    da = open_da(Shop, hosts=proxy.url)
    index = da.stats()["index"]
    setting = client.indices.get_settings(index=index, flat_settings=True)[index]["settings"]
    assert setting.get("index.knn.derived_source.enabled") == ("false" if major >= 3 else None)
    if major < 3:
        pytest.skip("derived source is off by default before OpenSearch 3")

    def derived_on(req):
        if req.method == "PUT" and req.body and b'"mappings"' in req.body:
            body = json.loads(req.body)
            del body["settings"]["index.knn.derived_source.enabled"]
            return Forward(body=json.dumps(body).encode())
        return None

    proxy.rule = derived_on
    old = open_da(Shop, hosts=proxy.url)
    proxy.rule = None
    index = old.stats()["index"]
    got = client.indices.get_settings(index=index, include_defaults=True, flat_settings=True)[index]
    assert {**got["defaults"], **got["settings"]}["index.knn.derived_source.enabled"] == "true"
    docs = shop(30, seed=9)
    old.extend(docs)  # one bulk request: the documents share a segment
    n = len(proxy.requests)
    hit = [d["id"] for d in docs if d["ok"]]
    assert old.update_many({"ok": True}, price=1) == len(hit)
    assert old.delete(filter={"ok": False}) == len(docs) - len(hit)
    sent = [r.path.split("?")[0].rsplit("/", 1)[-1] for r in proxy.requests[n:]]
    assert "_update_by_query" not in sent and "_delete_by_query" not in sent and "_bulk" in sent
    assert sorted(d.id for d in old.find(filter={"price": 1}, limit=None).docs) == sorted(hit) == sorted(
        d.id for d in old)
