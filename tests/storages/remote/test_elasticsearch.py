"""storage="elasticsearch" / "opensearch" beyond the shared suite, against real nodes on 127.0.0.1
(tests/engines.py starts them with scripts/searchnode.sh when none answers)."""
import logging
import sys
import uuid

import numpy as np
import pytest

import hybridsearch as hs
from hybridsearch.storages.remote.elasticsearch import query as Q
from hybridsearch.storages.remote.elasticsearch.storage import ElasticsearchStorage
from tests.engines import STORAGE_KIND, engine

REMOTE = ["elasticsearch", "opensearch"]


class Item(hs.Document):
    title: hs.Text
    body: hs.Text = ""
    tag: hs.Keyword = "a"
    n: int = 0
    v: hs.Vector[4]


@pytest.fixture(params=REMOTE)
def remote(request):
    """(storage name, url) of a running node, or a skip naming why none could be started."""
    url, why = engine(STORAGE_KIND[request.param])
    if url is None:
        pytest.skip(f"no {request.param} node: {why}")
    return request.param, url


@pytest.fixture
def open_da(remote):
    storage, url = remote
    made = []

    def make(schema=Item, **options):
        options.setdefault("index", f"hs-test-{uuid.uuid4().hex}")
        options.setdefault("refresh", True)
        da = hs.DocumentArray(schema, storage=storage, hosts=url, **options)
        made.append(da)
        return da

    yield make
    for da in made:
        b = da._backend
        client = b._make_client(b.options)
        client.indices.delete(index=b.index, ignore_unavailable=True)
        client.close()


def items(a, b, rng):
    return [{"id": f"i{i}", "title": f"red shoe {i}", "tag": "ab"[i % 2], "n": i, "v": rng.standard_normal(4)}
            for i in range(a, b)]


@pytest.mark.parametrize("metric,similarity,space", [("cosine", "cosine", "cosinesimil"),
                                                     ("ip", "max_inner_product", "innerproduct"),
                                                     ("l2", "l2_norm", "l2")])
def test_mapping_comes_from_the_schema(open_da, remote, metric, similarity, space):
    da = open_da(metric=metric, m=8, ef_construct=50)
    b = da._backend
    props = dict(b.client.indices.get_mapping(index=b.index))[b.index]["mappings"]["properties"]
    assert props["title"] == {"type": "text", "analyzer": "standard"} and props["tag"]["type"] == "keyword"
    assert props["n"]["type"] == "long"
    vec = props["v"]
    if remote[0] == "elasticsearch":
        assert vec["type"] == "dense_vector" and vec["dims"] == 4 and vec["similarity"] == similarity
        assert vec["index_options"]["type"] == "hnsw"
        assert (vec["index_options"]["m"], vec["index_options"]["ef_construction"]) == (8, 50)
    else:
        assert vec["type"] == "knn_vector" and vec["dimension"] == 4
        assert vec["method"]["engine"] == "lucene" and vec["method"]["space_type"] == space
        assert vec["method"]["parameters"] == {"m": 8, "ef_construction": 50}


def test_wait_for_refresh_makes_writes_visible_on_return(open_da):
    da = open_da(refresh="wait_for")
    rng = np.random.default_rng(0)
    for i in range(3):
        da.extend(items(i, i + 1, rng))
        assert da.find(filter={"n": i}).ids == [f"i{i}"]
        assert da.find(text=f"shoe {i}", limit=1).ids == [f"i{i}"]
    da.update("i1", tag="zz")
    assert da.find(filter={"tag": "zz"}).ids == ["i1"]
    with pytest.raises(hs.ConfigError, match="refresh"):
        open_da(refresh=False)


def test_a_rejected_document_rolls_the_batch_back(open_da, remote):
    """The engine refuses a zero vector under cosine: the batch is undone, the old version restored."""
    da = open_da()
    rng = np.random.default_rng(1)
    da.extend(items(0, 5, rng))
    before = [d.model_dump_json() for d in da]
    bad = items(3, 4, rng) + [{**items(5, 6, rng)[0], "v": [0, 0, 0, 0]}] + items(6, 8, rng)
    bad[0]["title"] = "overwritten"
    with pytest.raises(hs.BackendError, match="rejected 1 of 4 documents") as err:
        da.extend(bad)
    assert "rolled back" in str(err.value)
    assert [d.model_dump_json() for d in da] == before and len(da) == 5
    assert da.find(text="overwritten").ids == []


def test_reopen_and_foreign_or_other_indexes(open_da, remote):
    storage, url = remote
    da = open_da()
    rng = np.random.default_rng(2)
    da.extend(items(0, 6, rng))
    da.extend(items(2, 3, rng))  # an upsert keeps its place
    again = hs.DocumentArray(Item, storage=storage, hosts=url, index=da._backend.index)
    assert [d.id for d in again] == [f"i{i}" for i in range(6)]
    again.extend(items(10, 11, rng))
    assert [d.id for d in again][-1] == "i10"
    with pytest.raises(hs.BackendError, match="another schema or metric"):
        hs.DocumentArray(Item, storage=storage, hosts=url, index=da._backend.index, metric="l2")
    foreign = f"hs-test-{uuid.uuid4().hex}"
    da._backend.client.indices.create(index=foreign)
    try:
        with pytest.raises(hs.BackendError, match="not created by hybridsearch"):
            hs.DocumentArray(Item, storage=storage, hosts=url, index=foreign)
    finally:
        da._backend.client.indices.delete(index=foreign)


@pytest.mark.parametrize("hostile", ["../_all", "a/b", "?x=1", "q\"uote", "it's", "%2F_all", "sp ace", "é/中",
                                     "..", "a,b", "*", "#frag", "%", "_all", "x\ny"])
def test_hostile_ids_are_data(open_da, hostile):
    da = open_da()
    rng = np.random.default_rng(3)
    da.extend(items(0, 3, rng))
    da.extend([{**items(9, 10, rng)[0], "id": hostile}])
    assert hostile in da and da[hostile].id == hostile and len(da) == 4
    da.update(hostile, n=77)
    assert da.find(filter={"n": 77}).ids == [hostile] and da.find(filter={"id": hostile}).ids == [hostile]
    assert da.delete([hostile]) == 1
    assert len(da) == 3 and hostile not in da and "i1" in da


@pytest.mark.parametrize("name", ["../x", "UPPER", "a/b", "_all", "a b", "x#y", "", "..", "a,b", "*"])
def test_hostile_index_names_are_refused_before_any_request(name):
    with pytest.raises(hs.ConfigError, match="index"):
        hs.DocumentArray(Item, storage="elasticsearch", hosts="http://127.0.0.1:1", index=name)


@pytest.mark.parametrize("storage", REMOTE)
def test_unreachable_node_is_a_backend_error_without_credentials(storage, caplog):
    caplog.set_level(logging.DEBUG)
    secret = "s3cr3t-pw"
    with pytest.raises(hs.BackendError) as err:
        hs.DocumentArray(Item, storage=storage, hosts="http://127.0.0.1:1", index="x",
                         basic_auth=("elastic", secret), max_retries=0)
    msg = str(err.value)
    assert "127.0.0.1:1" in msg and ("no response" in msg or "connect" in msg.lower())
    assert secret not in msg and secret not in caplog.text
    with pytest.raises(hs.BackendError) as err:
        hs.DocumentArray(Item, storage=storage, hosts=f"http://elastic:{secret}@127.0.0.1:1", index="x")
    assert secret not in str(err.value) and secret not in caplog.text


def test_credentials_are_passed_to_the_client_but_never_shown(remote):
    storage, url = remote
    # the test nodes run without security: the credentials reach the client and are not echoed anywhere
    da = hs.DocumentArray(Item, storage=storage, hosts=url, index=f"hs-test-{uuid.uuid4().hex}",
                          basic_auth=("elastic", "pw-xyz"))
    try:
        assert "pw-xyz" not in repr(da) and "pw-xyz" not in repr(da._backend)
        assert "basic_auth" not in da._backend.options and "api_key" not in da._backend.options
        client = da._backend.client
        headers = client._headers if storage == "elasticsearch" else client.transport.connection_pool.connections[0].headers
        assert any("authorization" == k.lower() for k in headers)
    finally:
        b = da._backend
        b.client.indices.delete(index=b.index, ignore_unavailable=True)
        da.close()


def test_tls_verification_is_on_by_default():
    b = ElasticsearchStorage.__new__(ElasticsearchStorage)
    b._secrets = []
    opts = ElasticsearchStorage.Config.parse("elasticsearch", {"hosts": "https://127.0.0.1:9"}).as_dict()
    client = b._make_client(opts)
    node = client.transport.node_pool.all()[0]
    assert node.config.scheme == "https" and node.config.verify_certs is True
    client.close()


def test_429_and_503_are_retried_with_backoff(monkeypatch):
    from elastic_transport import ApiResponseMeta, HttpHeaders, NodeConfig
    from elasticsearch import ApiError

    def api_error(status):
        meta = ApiResponseMeta(status=status, http_version="1.1", headers=HttpHeaders(), duration=0.0,
                               node=NodeConfig("http", "127.0.0.1", 9200))
        return ApiError(message="busy", meta=meta, body={"error": {"reason": "too many requests"}})

    b = ElasticsearchStorage.__new__(ElasticsearchStorage)
    b._secrets, b.max_retries, b.retry_backoff = [], 3, 0.01
    b.options = {"hosts": "http://127.0.0.1:9200"}
    b.engine = "Elasticsearch"
    sleeps = []
    monkeypatch.setattr(sys.modules["hybridsearch.storages.remote.elasticsearch.storage"].time, "sleep", sleeps.append)
    calls = iter([api_error(429), api_error(503), "ok"])

    def flaky():
        r = next(calls)
        if isinstance(r, Exception):
            raise r
        return r

    assert b._call("search", flaky) == "ok" and sleeps == [0.01, 0.02]
    with pytest.raises(hs.BackendError, match="status 400"):
        b._call("search", lambda: (_ for _ in ()).throw(api_error(400)))
    always = iter([api_error(429)] * 10)
    with pytest.raises(hs.BackendError, match="status 429"):
        b._call("search", lambda: (_ for _ in ()).throw(next(always)))


def test_filter_compiler_shapes():
    from hybridsearch.document import schema_of
    from hybridsearch.query.filters import parse_filter
    S = schema_of(Item)
    q = Q.to_query(parse_filter({"$not": {"tag": "x' OR 1=1"}, "n": {"$gte": 2, "$lt": 1e300}}, S), S)
    assert q == {"bool": {"filter": [{"bool": {"must_not": [{"term": {"tag": "x' OR 1=1"}}]}},
                                     {"bool": {"filter": [{"range": {"n": {"gte": 2}}}, {"match_all": {}}]}}]}}


def _patch_bulk(monkeypatch, da, storage, change):
    """Wraps the client class's bulk: change(call number, real bulk thunk) -> the response."""
    cls = type(da._backend.client)
    real = cls.bulk
    calls = []

    def bulk(self, *args, **kwargs):
        calls.append(kwargs)
        return change(len(calls), lambda: real(self, *args, **kwargs))

    monkeypatch.setattr(cls, "bulk", bulk)
    return calls


def _connection_error(storage):
    if storage == "elasticsearch":
        from elastic_transport import ConnectionError as Err
        return Err("connection reset (injected)")
    from opensearchpy.exceptions import ConnectionError as Err
    return Err("N/A", "connection reset (injected)", None)


def test_a_document_refused_with_429_is_resent_by_the_bulk_helper(open_da, remote, monkeypatch):
    da = open_da(retry_backoff=0.01)
    rng = np.random.default_rng(4)

    def first_item_429(n, send):
        resp = send()
        if n == 1:  # the node wrote it, but answers as if its write queue were full
            body = resp.body if hasattr(resp, "body") else resp
            (op, item), = body["items"][0].items()
            item.update(status=429, error={"type": "es_rejected_execution_exception", "reason": "queue full"})
            body["errors"] = True
        return resp

    calls = _patch_bulk(monkeypatch, da, remote[0], first_item_429)
    da.extend(items(0, 6, rng))
    assert len(calls) == 2  # the whole batch, then the one refused document again
    assert [d.id for d in da] == [f"i{i}" for i in range(6)]
    assert all(c.get("refresh") is True for c in calls)


def test_a_connection_lost_mid_batch_rolls_back_the_chunks_already_written(open_da, remote, monkeypatch):
    da = open_da(chunk_size=2)
    rng = np.random.default_rng(5)
    da.extend(items(0, 3, rng))
    before = [d.model_dump_json() for d in da]
    batch = items(1, 2, rng) + items(10, 14, rng)  # i1 overwritten in the first chunk
    batch[0]["title"] = "overwritten"

    def lose_second_chunk(n, send):
        if n == 2:
            raise _connection_error(remote[0])
        return send()

    calls = _patch_bulk(monkeypatch, da, remote[0], lose_second_chunk)
    with pytest.raises(hs.BackendError, match="no response.*rolled back") as err:
        da.extend(batch)
    assert "injected" in str(err.value)
    monkeypatch.undo()
    assert len(calls) >= 3  # chunk 1, chunk 2 (lost), then the repair
    assert [d.model_dump_json() for d in da] == before
    assert da.find(text="overwritten").ids == [] and "i10" not in da
    da.extend(items(20, 21, rng))  # the insertion counter was not advanced by the failed batch
    assert [d.id for d in da] == ["i0", "i1", "i2", "i20"]


def test_a_delete_stopped_half_way_puts_the_documents_back(open_da, remote, monkeypatch):
    da = open_da(chunk_size=2)
    rng = np.random.default_rng(6)
    da.extend(items(0, 5, rng))
    before = [d.model_dump_json() for d in da]

    def lose_second_chunk(n, send):
        if n == 2:
            raise _connection_error(remote[0])
        return send()

    _patch_bulk(monkeypatch, da, remote[0], lose_second_chunk)
    with pytest.raises(hs.BackendError, match="rolled back"):
        da.delete(["i0", "i1", "i2", "i3"])
    monkeypatch.undo()
    assert [d.model_dump_json() for d in da] == before
    assert da.delete(["i0", "nope", "i3"]) == 2 and [d.id for d in da] == ["i1", "i2", "i4"]


@pytest.fixture
def tls_node(tmp_path):
    """An HTTPS server on 127.0.0.1 with a fresh self-signed certificate that records what reaches it.

    It answers every request with a 500, so a client that gets through TLS fails with that
    status, and the test sees which headers (credentials) the client sent.
    """
    import shutil
    import ssl
    import subprocess
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    seen = []

    class Handler(BaseHTTPRequestHandler):
        def answer(self):
            seen.append((self.command, self.path, {k.lower(): v for k, v in self.headers.items()}))
            body = b'{"error": {"type": "fake", "reason": "test node"}, "status": 500}'
            self.send_response(500)
            self.send_header("Content-Type", "application/json")
            self.send_header("X-Elastic-Product", "Elasticsearch")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        do_GET = do_HEAD = do_PUT = do_POST = answer

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(cert), str(key))
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"https://127.0.0.1:{server.server_address[1]}", str(cert), seen
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("storage", REMOTE)
def test_tls_is_verified_and_ca_bundle_and_credentials_reach_the_server(storage, tls_node, caplog):
    import base64
    import warnings

    caplog.set_level(logging.DEBUG)
    url, ca, seen = tls_node
    # default: the self-signed certificate is refused before any request is sent
    with pytest.raises(hs.BackendError, match="(?i)certificate") as err:
        hs.DocumentArray(Item, storage=storage, hosts=url, index="x", basic_auth=("elastic", "pw-tls-1"))
    assert seen == [] and "pw-tls-1" not in str(err.value)
    # with the CA bundle the connection is trusted: the request and its credentials arrive
    with pytest.raises(hs.BackendError, match="status 500") as err:
        hs.DocumentArray(Item, storage=storage, hosts=url, index="x", basic_auth=("elastic", "pw-tls-1"),
                         ca_certs=ca)
    auth = seen[-1][2]["authorization"]
    assert auth == "Basic " + base64.b64encode(b"elastic:pw-tls-1").decode()
    assert "pw-tls-1" not in str(err.value)
    with pytest.raises(hs.BackendError, match="status 500") as err:
        hs.DocumentArray(Item, storage=storage, hosts=url, index="x", api_key="key-tls-2", ca_certs=ca)
    assert seen[-1][2]["authorization"] == "ApiKey key-tls-2" and "key-tls-2" not in str(err.value)
    # verification off only when asked
    n = len(seen)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(hs.BackendError, match="status 500"):
            hs.DocumentArray(Item, storage=storage, hosts=url, index="x", verify_certs=False)
    assert len(seen) > n
    assert "pw-tls-1" not in caplog.text and "key-tls-2" not in caplog.text


def test_listing_pages_through_tied_sequence_numbers(open_da, monkeypatch):
    """Two writers can hand out the same hs_seq: paging must still return every document once."""
    from hybridsearch.storages.remote.elasticsearch import storage as E
    da = open_da()
    rng = np.random.default_rng(7)
    docs = items(0, 23, rng)
    da.extend(docs[:12])
    da._backend.next_seq = 1  # a second writer that had not seen the first one's documents
    da.extend(docs[12:])
    monkeypatch.setattr(E, "_PAGE", 5)  # pages end between documents of equal sequence numbers
    ids = [d.id for d in da]
    assert sorted(ids) == sorted(d["id"] for d in docs) and len(ids) == 23
    assert da.find(filter={"tag": "a"}, limit=None).ids == [i for i in ids if int(i[1:]) % 2 == 0]


def test_find_batched_sends_the_queries_in_one_msearch(open_da, monkeypatch):
    da = open_da()
    rng = np.random.default_rng(8)
    da.extend(items(0, 400, rng))
    Qs = rng.standard_normal((6, 4))
    client = da._backend.client
    sent = []
    real = client.msearch
    monkeypatch.setattr(client, "msearch", lambda **kw: sent.append(kw) or real(**kw))
    batched = da.find_batched(Qs, limit=5, filter={"tag": "a"}, threads=1)
    assert len(sent) == 1 and len(sent[0]["body"]) == 12
    for q, res in zip(Qs, batched):
        one = da.find(vector=q, limit=5, filter={"tag": "a"})
        assert res.ids == one.ids and np.allclose(res.scores, one.scores)
        ref = [d.id for d in da.find(vector=q, limit=5, filter={"tag": "a"}, exact=True)]
        assert len(set(res.ids) & set(ref)) >= 4
    # one failed search in the batch fails the call with the engine's status
    body = da._backend._knn_body
    monkeypatch.setattr(da._backend, "_knn_body", lambda q, k, ef, flt: {**body(q, k, ef, flt), "size": -5})
    with pytest.raises(hs.BackendError, match="status 400"):
        da.find_batched(Qs, limit=5, threads=1)


@pytest.mark.parametrize("storage", REMOTE)
def test_a_node_that_never_answers_is_a_timeout_backend_error(storage):
    import socket
    import time as clock

    silent = socket.socket()  # accepts connections (the kernel's backlog) and never says a word
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    try:
        t0 = clock.perf_counter()
        with pytest.raises(hs.BackendError, match="(?i)no response.*time") as err:
            hs.DocumentArray(Item, storage=storage, hosts=f"http://127.0.0.1:{silent.getsockname()[1]}",
                             index="x", timeout=0.5)
        assert clock.perf_counter() - t0 < 10 and "127.0.0.1" in str(err.value)
    finally:
        silent.close()
