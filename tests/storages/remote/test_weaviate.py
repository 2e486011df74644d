"""storage="weaviate" beyond the shared suite, against a real Weaviate server on 127.0.0.1
(tests/engines.py starts one with scripts/weaviatenode.sh when none answers).

What a test must see on the server it reads with the official client (weaviate-client v4) on
the same ports: object ids are uuid5 of the document ids, the collection's properties come
from the schema, a text find's scores are the best single property's BM25 as Weaviate computes
it. Filter semantics are the shared suite's (tests/contract/test_filters.py). The collection's
name is read from da.stats(); an answer the server would rarely give (an object refused, a
graph walk cut short) is made by wrapping weaviate-client's public names, never ours."""
import copy
import dataclasses
import socket
import time
import uuid

import numpy as np
import pytest
import hybridsearch as hs
from hybridsearch.query.filters import Compare, parse_filter
from hybridsearch.storages.remote.weaviate import config as C
from hybridsearch.storages.remote.weaviate import filters as F
from tests.engines import WEAVIATE_GRPC, engine
from tests.models import TwoTextItem as Item


def items(a, b, rng):
    return [Item(id=f"i{i}", title=f"red phone {i}" if i % 2 else "blue case", tag="ab"[i % 2], n=i,
                 v=rng.random(4)) for i in range(a, b)]


@pytest.fixture
def server():
    url, why = engine("weaviate")
    if url is None:
        pytest.skip(f"no weaviate server: {why}")
    return url


@pytest.fixture
def client(server):
    import weaviate
    host, port = server.split("//")[1].split(":")
    c = weaviate.connect_to_custom(http_host=host, http_port=int(port), http_secure=False, grpc_host=host,
                                   grpc_port=WEAVIATE_GRPC, grpc_secure=False)
    yield c
    c.close()


@pytest.fixture
def open_da(server, client):
    """open_da(schema=Item, **options) -> a DocumentArray on a fresh collection, dropped after."""
    names, opened = [], []

    def make(schema=Item, **options):
        options.setdefault("collection", f"HsW{uuid.uuid4().hex}")
        names.append(options["collection"])
        opened.append(hs.DocumentArray(schema, storage="weaviate", url=server, grpc_port=WEAVIATE_GRPC, **options))
        return opened[-1]

    yield make
    for da in opened:
        da.close()
    for name in names:
        client.collections.delete(name)


def test_object_ids_are_uuid5_of_the_ids_and_the_id_is_kept(open_da, client):
    da = open_da()
    da.extend(items(0, 3, np.random.default_rng(1)) + [Item(id="../é x", title="odd", v=[1, 0, 0, 0])])
    col = client.collections.get(da.stats()["collection"])
    for i in ("i0", "i2", "../é x"):
        obj = col.query.fetch_object_by_id(uuid.uuid5(C.NAMESPACE, i))
        assert obj is not None and obj.properties["hs_id"] == i
    assert C.object_id("i0") == uuid.uuid5(uuid.uuid5(uuid.NAMESPACE_URL, "https://github.com/hybridsearch/ids"), "i0")
    assert da["../é x"].title == "odd" and da.find(filter={"id": "../é x"}).ids == ["../é x"]


def test_the_collection_comes_from_the_schema(open_da, client):
    da = open_da(metric="l2", m=8, ef_construct=64)
    cfg = client.collections.get(da.stats()["collection"]).config.get()
    props = {p.name: p for p in cfg.properties}
    assert props["title"].tokenization.value == "word" and props["title"].index_searchable
    assert props["tag"].tokenization.value == "field" and not props["tag"].index_searchable
    assert props["n"].data_type.value == "int" and props["hs_seq"].data_type.value == "int"
    assert not props["hs_extra"].index_filterable
    hnsw = cfg.vector_config["default"].vector_index_config
    assert hnsw.distance_metric.value == "l2-squared" and hnsw.max_connections == 8 and hnsw.ef_construction == 64
    assert cfg.inverted_index_config.stopwords.preset.value == "none"
    bm25 = cfg.inverted_index_config.bm25
    assert bm25.k1 == pytest.approx(1.2) and bm25.b == pytest.approx(0.75)


def test_reopen_and_foreign_or_other_collections(open_da, client):
    da = open_da()
    da.extend(items(0, 4, np.random.default_rng(2)))
    name = da.stats()["collection"]
    da.close()
    again = open_da(collection=name)
    assert [d.id for d in again] == ["i0", "i1", "i2", "i3"]
    again.extend(items(4, 5, np.random.default_rng(2)))
    assert [d.id for d in again][-1] == "i4"  # insertion numbers go on after the stored ones
    with pytest.raises(hs.BackendError, match="another schema or metric"):
        open_da(collection=name, metric="ip")
    foreign = f"Foreign{uuid.uuid4().hex}"
    client.collections.create(foreign)
    try:
        with pytest.raises(hs.BackendError, match="not created by hybridsearch"):
            open_da(collection=foreign)
    finally:
        client.collections.delete(foreign)


def test_openers_racing_to_create_one_collection_all_open_it(server, client):
    # several processes starting at once on a new collection: one creates it, the others open it
    import concurrent.futures as cf
    name = f"HsW{uuid.uuid4().hex}"
    arrays = []
    try:
        with cf.ThreadPoolExecutor(4) as pool:
            arrays = list(pool.map(lambda _: hs.DocumentArray(Item, storage="weaviate", url=server,
                                                              grpc_port=WEAVIATE_GRPC, collection=name), range(4)))
        arrays[0].extend(items(0, 2, np.random.default_rng(5)))
        assert all(sorted(d.id for d in a) == ["i0", "i1"] for a in arrays)
    finally:
        for a in arrays:
            a.close()
        client.collections.delete(name)


@pytest.mark.parametrize("name", ["9x", "a-b", "a b", "", "x/y", "é"])
def test_bad_collection_names_are_refused_before_any_request(name):
    with pytest.raises(hs.ConfigError, match="collection"):
        hs.DocumentArray(Item, storage="weaviate", url="http://127.0.0.1:1", collection=name)


def test_unreachable_server_is_a_backend_error_saying_where():
    t0 = time.perf_counter()
    with pytest.raises(hs.BackendError) as err:
        hs.DocumentArray(Item, storage="weaviate", url="http://127.0.0.1:1", grpc_port=2, max_retries=0,
                         api_key="k3y-s3cr3t")
    msg = str(err.value)
    assert msg.startswith("Weaviate at http://127.0.0.1:1 failed to connect (no response):")
    assert "k3y-s3cr3t" not in msg and time.perf_counter() - t0 < 30


def test_a_server_that_never_answers_is_a_backend_error():
    silent = socket.socket()  # accepts connections (the kernel's backlog) and never says a word
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    try:
        with pytest.raises(hs.BackendError, match="Weaviate at http://127.0.0.1:.*failed to connect"):
            hs.DocumentArray(Item, storage="weaviate", url=f"http://127.0.0.1:{silent.getsockname()[1]}",
                             timeout=0.5, max_retries=0)
    finally:
        silent.close()


def test_a_refused_object_rolls_the_batch_back(open_da, monkeypatch):
    da = open_da()
    rng = np.random.default_rng(4)
    da.extend(items(0, 3, rng))
    before = {d.id: d for d in da}
    import weaviate.classes.data as wdata
    real = wdata.DataObject

    def broken(**kw):  # the server refuses a vector of another length than the collection's
        obj = real(**kw)
        return dataclasses.replace(obj, vector=[1.0, 2.0]) if kw["properties"]["hs_id"] == "i7" else obj

    monkeypatch.setattr(wdata, "DataObject", broken)  # the client's public class, as the storage builds objects
    new = items(1, 2, rng) + items(5, 9, rng)  # overwrites i1, adds i5..i8 of which i7 is refused
    with pytest.raises(hs.BackendError, match="rejected 1 objects.*'i7'.*rolled back"):
        da.extend(new)
    monkeypatch.undo()
    after = {d.id: d for d in da}
    assert list(after) == list(before)
    assert np.array_equal(after["i1"].v, before["i1"].v) and after["i1"].title == before["i1"].title
    da.extend(items(5, 6, rng))
    assert [d.id for d in da] == ["i0", "i1", "i2", "i5"]  # the batch's insertion numbers were given back


def test_each_text_property_is_scored_alone_and_the_best_one_wins(open_da, client):
    """Weaviate's own multi-property BM25 sums the properties (BM25F-like); ours keeps the best
    one, which is Weaviate's score with that property queried alone."""
    da = open_da()
    rng = np.random.default_rng(5)
    da.extend([Item(id="a", title="usb cable", body="usb usb charger", v=rng.random(4)),
               Item(id="b", title="usb", body="cable", v=rng.random(4)),
               Item(id="c", title="charger", body="fast charger usb", v=rng.random(4))])
    col = client.collections.get(da.stats()["collection"])
    per = {}
    for prop in ("title", "body"):
        for o in col.query.bm25("usb cable", query_properties=[prop], return_metadata=["score"]).objects:
            per.setdefault(o.properties["hs_id"], []).append(o.metadata.score)
    res = da.find(text="usb cable", limit=3)
    assert res.ids and set(res.ids) == set(per)
    for i, s in zip(res.ids, res.scores):
        assert s == pytest.approx(max(per[i]), rel=1e-5)
    together = {o.properties["hs_id"]: o.metadata.score
                for o in col.query.bm25("usb cable", return_metadata=["score"]).objects}
    assert any(abs(together[i] - max(per[i])) > 1e-3 for i in per)  # the two really differ
    weighted = da.find(text="usb cable", text_fields={"body": 2.0}, limit=3)
    body = {o.properties["hs_id"]: o.metadata.score
            for o in col.query.bm25("usb cable", query_properties=["body"], return_metadata=["score"]).objects}
    assert dict(zip(weighted.ids, weighted.scores.tolist())) == pytest.approx({i: 2 * s for i, s in body.items()})


def test_the_query_syntax_is_refused_with_a_reason(open_da):
    da = open_da()
    da.extend(items(0, 2, np.random.default_rng(6)))
    with pytest.raises(hs.UnsupportedError, match="query syntax"):
        da.find(text='"red phone"')
    assert da.find(text="phone", operator="and").ids == ["i1"]


def test_filter_compiler_decides_impossible_comparisons_itself():
    schema = hs.document.schema_of(Item)
    # beyond int64 / at infinity: no request could say it, so it is decided here
    assert repr(F.compile_filter(Compare("n", "$gt", 2 ** 70), schema)) == repr(F.nothing())
    assert repr(F.compile_filter(Compare("n", "$lt", 2 ** 70), schema)) == repr(F.everything())
    below = F.compile_filter(Compare("n", "$lt", 2.5), schema)
    assert repr(below) == repr(F.compile_filter(Compare("n", "$lt", 3), schema))
    assert F.compile_filter(parse_filter({}, schema), schema) is None


def test_a_vector_answer_that_comes_back_short_is_completed_exactly(open_da, client, monkeypatch):
    da = open_da()
    rng = np.random.default_rng(8)
    da.extend(items(0, 30, rng))
    # every near_vector answer of weaviate-client's query namespace cut to 2 objects: a graph walk
    # cut short (the exact completion reads the objects with fetch_objects, which stays whole)
    queries = type(client.collections.get(da.stats()["collection"]).query)
    real = queries.near_vector

    def short(self, *args, **kwargs):
        res = copy.copy(real(self, *args, **kwargs))  # the client's return class may not be a dataclass
        res.objects = res.objects[:2]
        return res

    monkeypatch.setattr(queries, "near_vector", short)
    q = rng.random(4)
    X = np.stack([d.v for d in da])
    ids = [d.id for d in da]
    cos = X @ q / (np.linalg.norm(X, axis=1) * np.linalg.norm(q))
    want = [ids[i] for i in np.argsort(-cos, kind="stable")[:5]]
    res = da.find(vector=q, limit=5)
    assert res.ids == want and np.allclose(res.scores, np.sort(cos)[::-1][:5], atol=1e-6)
    flt = da.find(vector=q, limit=5, filter={"tag": "a"})
    assert flt.ids == [i for i in [ids[j] for j in np.argsort(-cos, kind="stable")] if int(i[1:]) % 2 == 0][:5]
