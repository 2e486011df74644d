"""storage="elasticsearch" / "opensearch" beyond the shared suite, against real nodes on 127.0.0.1
(tests/engines.py starts them with scripts/searchnode.sh when none answers).

Public API only: what a test must see on the engine it reads with the engine's official
client on the same URL; failures a healthy node does not produce (busy answers, a connection
lost half-way, a refused document) come from a proxy between the storage and the node
(proxy.py), and credentials and TLS are checked against a local HTTPS server.
"""
import base64
import json
import logging
import time
import uuid
from typing import Annotated

import numpy as np
import pytest

import hybridsearch as hs
from hybridsearch.storages.remote.elasticsearch import query as Q
from tests.engines import STORAGE_KIND, engine
from tests.models import TwoTextItem as Item
from tests.storages.remote.proxy import DROP, FaultProxy, Forward, Reply, official_client

REMOTE = ["elasticsearch", "opensearch"]


@pytest.fixture(params=REMOTE)
def remote(request):
    """(storage name, url) of a running node, or a skip naming why none could be started."""
    url, why = engine(STORAGE_KIND[request.param])
    if url is None:
        pytest.skip(f"no {request.param} node: {why}")
    return request.param, url


@pytest.fixture
def client(remote):
    c = official_client(*remote)
    yield c
    c.close()


@pytest.fixture
def proxy(remote):
    """A FaultProxy in front of the node (forwards everything until a test sets its rule)."""
    p = FaultProxy(remote[1])
    yield p
    p.close()


@pytest.fixture
def open_da(remote, client):
    """open_da(schema, hosts=..., **options) -> a DocumentArray on a fresh index (dropped after)."""
    storage, url = remote
    made = []

    def make(schema=Item, **options):
        options.setdefault("hosts", url)
        options.setdefault("index", f"hs-test-{uuid.uuid4().hex}")
        options.setdefault("refresh", True)
        made.append(options["index"])
        return hs.DocumentArray(schema, storage=storage, **options)

    yield make
    for index in made:
        client.indices.delete(index=index, ignore_unavailable=True)


def items(a, b, rng):
    return [{"id": f"i{i}", "title": f"red shoe {i}", "tag": "ab"[i % 2], "n": i, "v": rng.standard_normal(4)}
            for i in range(a, b)]


@pytest.mark.parametrize("metric,similarity,space", [("cosine", "cosine", "cosinesimil"),
                                                     ("ip", "max_inner_product", "innerproduct"),
                                                     ("l2", "l2_norm", "l2")])
def test_mapping_comes_from_the_schema(open_da, remote, client, metric, similarity, space):
    index = open_da(metric=metric, m=8, ef_construct=50).stats()["index"]
    props = dict(client.indices.get_mapping(index=index))[index]["mappings"]["properties"]
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


def test_reopen_and_foreign_or_other_indexes(open_da, remote, client):
    storage, url = remote
    da = open_da()
    rng = np.random.default_rng(2)
    da.extend(items(0, 6, rng))
    da.extend(items(2, 3, rng))  # an upsert keeps its place
    index = da.stats()["index"]
    again = hs.DocumentArray(Item, storage=storage, hosts=url, index=index)
    assert [d.id for d in again] == [f"i{i}" for i in range(6)]
    again.extend(items(10, 11, rng))
    assert [d.id for d in again][-1] == "i10"
    with pytest.raises(hs.BackendError, match="another schema or metric"):
        hs.DocumentArray(Item, storage=storage, hosts=url, index=index, metric="l2")
    foreign = f"hs-test-{uuid.uuid4().hex}"
    client.indices.create(index=foreign)
    try:
        with pytest.raises(hs.BackendError, match="not created by hybridsearch"):
            hs.DocumentArray(Item, storage=storage, hosts=url, index=foreign)
    finally:
        client.indices.delete(index=foreign)


def test_stats_say_where_the_collection_lives_without_credentials(open_da, remote):
    storage, url = remote
    da = open_da(hosts=url.replace("http://", "http://elastic:pw-url@"))
    da.extend(items(0, 3, np.random.default_rng(9)))
    stats = da.stats()
    assert stats["storage"] == storage and stats["documents"] == 3
    assert stats["hosts"] == url and stats["index"].startswith("hs-test-")
    assert "basic_auth" not in stats and "api_key" not in stats
    assert "pw-url" not in str(stats) and "pw-url" not in repr(da)


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


def test_credentials_are_passed_to_the_client_but_never_shown(open_da, proxy):
    # the test nodes run without security: the credentials reach the node (seen by the proxy)
    # and are not echoed anywhere
    da = open_da(hosts=proxy.url, basic_auth=("elastic", "pw-xyz"))
    assert proxy.requests and all(r.headers.get("authorization") == "Basic " + base64.b64encode(
        b"elastic:pw-xyz").decode() for r in proxy.requests)
    stats = da.stats()
    assert "pw-xyz" not in repr(da) and "pw-xyz" not in str(stats)
    assert "basic_auth" not in stats and "api_key" not in stats


def _answer(status):
    return Reply(status, {"error": {"type": "test", "reason": f"answered {status} by the proxy"}, "status": status})


def test_429_and_503_are_retried_with_backoff(open_da, proxy):
    da = open_da(hosts=proxy.url, retry_backoff=0.2)
    da.extend(items(0, 3, np.random.default_rng(10)))
    busy = iter([429, 503])

    def busy_twice(req):
        status = next(busy, None) if req.path.split("?")[0].endswith("/_search") else None
        return _answer(status) if status else None

    proxy.rule, n = busy_twice, len(proxy.requests)
    assert da.find(filter={"n": 1}).ids == ["i1"]
    sent = proxy.requests[n:]
    assert len(sent) == 3  # refused twice, answered the third time
    # the resends wait retry_backoff, then twice that
    assert sent[1].time - sent[0].time >= 0.2 and sent[2].time - sent[1].time >= 0.4
    proxy.rule, n = (lambda req: _answer(400)), len(proxy.requests)
    with pytest.raises(hs.BackendError, match="status 400"):
        da.find(filter={"n": 1})
    assert len(proxy.requests) == n + 1  # an error answer other than 429 / 503 is not resent
    proxy.rule, n = (lambda req: _answer(429)), len(proxy.requests)
    with pytest.raises(hs.BackendError, match="status 429"):
        hs.DocumentArray(Item, storage=da.storage, hosts=proxy.url, index="hs-never-made", max_retries=2,
                         retry_backoff=0.01)
    assert len(proxy.requests) == n + 3  # max_retries resends, then the error


def test_an_index_created_but_answered_503_is_opened_on_the_resend(open_da, proxy, remote, client):
    # a loaded cluster can create the index and still answer the request with 503 (CI saw it on
    # the OpenSearch cluster); the resend finds the index: it must open it, not fail "already exists"
    answered = []

    def create_then_503(req):
        if req.method == "PUT" and req.path.split("?")[0].count("/") == 1 and not answered:
            answered.append(req.path)
            return Forward(status=503)
        return None

    proxy.rule = create_then_503
    da = open_da(hosts=proxy.url, retry_backoff=0.01)
    assert answered and len([r for r in proxy.requests if r.method == "PUT"]) == 2  # created, then resent
    da.extend(items(0, 3, np.random.default_rng(4)))
    assert sorted(d.id for d in da) == ["i0", "i1", "i2"]
    # the "already exists" path still checks what it opens: another schema there is refused
    index = da.stats()["index"]
    proxy.rule = lambda req: Reply(404, {}) if req.method == "HEAD" else None  # "absent" once more
    with pytest.raises(hs.BackendError, match="another schema or metric"):
        hs.DocumentArray(Item, storage=remote[0], hosts=proxy.url, index=index, metric="l2")
    assert sorted(d.id for d in da) == ["i0", "i1", "i2"]


def test_openers_racing_to_create_one_index_all_open_it(remote, client):
    # several processes starting at once on a new index: one creates it, the others open it
    import concurrent.futures as cf
    storage, url = remote
    index = f"hs-test-{uuid.uuid4().hex}"
    try:
        with cf.ThreadPoolExecutor(4) as pool:
            arrays = list(pool.map(lambda _: hs.DocumentArray(Item, storage=storage, hosts=url, index=index,
                                                              refresh=True), range(4)))
        arrays[0].extend(items(0, 2, np.random.default_rng(5)))
        assert all(sorted(d.id for d in a) == ["i0", "i1"] for a in arrays)
    finally:
        client.indices.delete(index=index, ignore_unavailable=True)


def test_slow_calls_and_resends_are_logged(open_da, proxy, caplog):
    da = open_da(hosts=proxy.url, retry_backoff=0.05, slow_call=0.25)
    da.extend(items(0, 3, np.random.default_rng(11)))
    caplog.set_level(logging.INFO, logger="hybridsearch")
    caplog.clear()
    assert da.find(filter={"n": 1}).ids == ["i1"]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]  # a quick call is quiet

    def slow_search(req):
        if req.path.split("?")[0].endswith("/_search"):
            time.sleep(0.4)
        return None

    proxy.rule = slow_search
    assert da.find(filter={"n": 2}).ids == ["i2"]
    slow = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(slow) == 1 and "took" in slow[0] and "slow_call=0.25" in slow[0] and proxy.url.split("//")[1] in slow[0]
    busy = iter([429])

    def busy_once(req):
        status = next(busy, None) if req.path.split("?")[0].endswith("/_search") else None
        return _answer(status) if status else None

    caplog.clear()
    proxy.rule = busy_once
    assert da.find(filter={"n": 0}).ids == ["i0"]
    assert any("429" in r.getMessage() and "resending" in r.getMessage() for r in caplog.records
               if r.levelno == logging.INFO)


def test_filter_compiler_shapes():
    from hybridsearch.document import schema_of
    from hybridsearch.query.filters import parse_filter
    S = schema_of(Item)
    q = Q.to_query(parse_filter({"$not": {"tag": "x' OR 1=1"}, "n": {"$gte": 2, "$lt": 1e300}}, S), S)
    assert q == {"bool": {"filter": [{"bool": {"must_not": [{"term": {"tag": "x' OR 1=1"}}]}},
                                     {"bool": {"filter": [{"range": {"n": {"gte": 2}}}, {"match_all": {}}]}}]}}


def _nth_bulk(n, action):
    """A proxy rule: `action` for the n-th bulk request (1-based), everything else forwarded."""
    count = [0]

    def rule(req):
        if not req.path.split("?")[0].endswith("/_bulk"):
            return None
        count[0] += 1
        return action if count[0] == n else None
    return rule


def _first_item_429(answer):
    """The node wrote the first document, but answers as if its write queue were full."""
    (op, item), = answer["items"][0].items()
    item.update(status=429, error={"type": "es_rejected_execution_exception", "reason": "queue full"})
    answer["errors"] = True


def test_a_document_refused_with_429_is_resent_by_the_bulk_helper(open_da, proxy):
    da = open_da(hosts=proxy.url, retry_backoff=0.01)
    rng = np.random.default_rng(4)
    proxy.rule = _nth_bulk(1, Forward(edit=_first_item_429))
    da.extend(items(0, 6, rng))
    bulks = proxy.seen("/_bulk")
    assert len(bulks) == 2  # the whole batch, then the one refused document again
    assert len(bulks[0].lines()) == 12 and len(bulks[1].lines()) == 2
    assert [d.id for d in da] == [f"i{i}" for i in range(6)]
    assert all("refresh=true" in b.path for b in bulks)


def test_a_connection_lost_mid_batch_rolls_back_the_chunks_already_written(open_da, proxy):
    da = open_da(hosts=proxy.url, chunk_size=2)
    rng = np.random.default_rng(5)
    da.extend(items(0, 3, rng))
    before = [d.model_dump_json() for d in da]
    batch = items(1, 2, rng) + items(10, 14, rng)  # i1 overwritten in the first chunk
    batch[0]["title"] = "overwritten"
    proxy.rule, n = _nth_bulk(2, DROP), len(proxy.seen("/_bulk"))  # the second chunk never arrives
    with pytest.raises(hs.BackendError, match="no response.*rolled back"):
        da.extend(batch)
    proxy.rule = None
    assert len(proxy.seen("/_bulk")) - n >= 3  # chunk 1, chunk 2 (lost), then the repair
    assert [d.model_dump_json() for d in da] == before
    assert da.find(text="overwritten").ids == [] and "i10" not in da
    da.extend(items(20, 21, rng))  # the insertion counter was not advanced by the failed batch
    assert [d.id for d in da] == ["i0", "i1", "i2", "i20"]


def test_a_delete_stopped_half_way_puts_the_documents_back(open_da, proxy):
    da = open_da(hosts=proxy.url, chunk_size=2)
    rng = np.random.default_rng(6)
    da.extend(items(0, 5, rng))
    before = [d.model_dump_json() for d in da]
    proxy.rule = _nth_bulk(2, DROP)
    with pytest.raises(hs.BackendError, match="rolled back"):
        da.delete(["i0", "i1", "i2", "i3"])
    proxy.rule = None
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


def test_listing_pages_through_tied_sequence_numbers(open_da, remote):
    """Two writers can hand out the same hs_seq: paging must still return every document once.

    The second writer opens after the first wrote one document, so both then number their
    documents 2, 3, ...: after the lone 1, every insertion number is held by two documents,
    and the first page (5,000 documents) ends between the two documents of number 2,501."""
    storage, url = remote
    da = open_da()
    rng = np.random.default_rng(7)
    docs = items(0, 5003, rng)
    da.extend(docs[:1])
    other = hs.DocumentArray(Item, storage=storage, hosts=url, index=da.stats()["index"], refresh=True)
    da.extend(docs[1:2502])
    other.extend(docs[2502:])
    ids = [d.id for d in da]
    assert sorted(ids) == sorted(d["id"] for d in docs) and len(ids) == 5003
    assert da.find(filter={"tag": "a"}, limit=None).ids == [i for i in ids if int(i[1:]) % 2 == 0]


def test_find_batched_sends_the_queries_in_one_msearch(open_da, proxy):
    da = open_da(hosts=proxy.url)
    rng = np.random.default_rng(8)
    da.extend(items(0, 400, rng))
    Qs = rng.standard_normal((6, 4))
    n = len(proxy.seen("/_msearch"))
    batched = da.find_batched(Qs, limit=5, filter={"tag": "a"}, threads=1)
    sent = proxy.seen("/_msearch")[n:]
    assert len(sent) == 1 and len(sent[0].lines()) == 12
    for q, res in zip(Qs, batched):
        one = da.find(vector=q, limit=5, filter={"tag": "a"})
        assert res.ids == one.ids and np.allclose(res.scores, one.scores)
        ref = [d.id for d in da.find(vector=q, limit=5, filter={"tag": "a"}, exact=True)]
        assert len(set(res.ids) & set(ref)) >= 4

    # one failed search in the batch fails the call with the engine's status
    def one_bad_search(req):
        if not req.path.split("?")[0].endswith("/_msearch"):
            return None
        lines = req.lines()
        lines[3]["size"] = -5  # the second search
        return Forward(body="".join(json.dumps(ln) + "\n" for ln in lines).encode())

    proxy.rule = one_bad_search
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


def test_a_password_in_the_url_is_in_no_config_repr_or_error():
    # the config classes are where options are parsed: no public path shows their repr as directly
    from hybridsearch.storages.remote.elasticsearch.storage import ElasticsearchStorage
    from hybridsearch.storages.remote.vespa.storage import VespaStorage
    es = ElasticsearchStorage.Config.parse("elasticsearch", {"hosts": "http://u:pw-in-url@127.0.0.1:9"})
    vespa = VespaStorage.Config.parse("vespa", {"url": "http://u:pw-in-url@127.0.0.1:9"})
    assert "pw-in-url" not in repr(es) and "pw-in-url" not in repr(vespa)
    assert "pw-in-url" not in str(es.as_public_dict()) and "pw-in-url" not in str(vespa.as_public_dict())
    with pytest.raises(hs.ConfigError) as err:
        ElasticsearchStorage.Config.parse("elasticsearch", {"hosts": ["http://u:pw-in-url@h", 3]})
    assert "pw-in-url" not in str(err.value)


# ------------------------------------------- API.md section 8 and the text query syntax
def test_text_query_shapes():
    """Plain words stay one multi_match (weights as field^w); the syntax is a dis_max of per-field
    bools, exclusions a must_not over every searched field; a clause without a word is dropped."""
    from hybridsearch.query.text import TextQuery
    from hybridsearch.storages.remote.elasticsearch import lexical as L
    assert L.text_clause("red shoe", ["title", "body"]) == {
        "multi_match": {"query": "red shoe", "fields": ["title", "body"], "type": "best_fields"}}
    weighted = L.text_clause(TextQuery("red shoe", (("title", 2.0), ("body", 0.5)), "and"), ["title", "body"])
    assert weighted["multi_match"]["fields"] == ["title^2.0", "body^0.5"]
    assert weighted["multi_match"]["operator"] == "and"
    q = L.text_clause(TextQuery('"red shoe" +sh* -blue !!', (("title", 2.0),)), ["title", "body"], 2.2)
    title, = q["bool"]["must"][0]["dis_max"]["queries"]
    assert title == {"bool": {"must": [{"prefix": {"title": {"value": "sh", "rewrite": "constant_score",
                                                             "boost": 2.2}}}],
                              "should": [{"match_phrase": {"title": {"query": "red shoe"}}}],
                              "minimum_should_match": 0, "boost": 2.0}}
    assert q["bool"]["must_not"] == [{"match": {"title": {"query": "blue", "operator": "or"}}}]
    assert L.text_clause("-blue +!!", ["title"]) == L.NOTHING  # nothing to score: no match


class Dish(hs.Document):
    name: Annotated[hs.Text, hs.Analyzer(stemmer=None)]     # the engines' standard analyzer does not stem
    notes: Annotated[hs.Text, hs.Analyzer(stemmer=None)] = ""
    v: hs.Vector[2]


DISHES = [{"id": "1", "name": "New York pizza", "notes": "thin crust", "v": [1, 0]},
          {"id": "2", "name": "Pizza, New York style", "notes": "large slices", "v": [0.9, 0.3]},
          {"id": "3", "name": "York ham", "notes": "new potatoes, York cheese, new york", "v": [0.2, 1]},
          {"id": "4", "name": "Running club pasta", "notes": "batteries not included", "v": [0, 1]},
          {"id": "5", "name": "Runner beans", "notes": "newly picked", "v": [-1, 0.1]}]


def same_ranking(a, b) -> bool:
    """The same hits with the same scores (relative 1e-5), in the same order up to equal scores."""
    return (len(a) == len(b) and np.allclose(a.scores, b.scores, rtol=1e-5)
            and {(i, round(float(s), 4)) for i, s in zip(a.ids, a.scores)}
            == {(i, round(float(s), 4)) for i, s in zip(b.ids, b.scores)})


def test_the_syntax_answers_as_the_memory_storage(open_da):
    """The same answers and scores as memory's on an unstemmed schema (no write since the index was
    made, lengths below 24 tokens: Lucene's statistics and norms are exact), in every mode."""
    remote, mem = open_da(Dish), hs.DocumentArray(Dish)
    remote.extend(DISHES)
    mem.extend(DISHES)
    queries = ['"new york"', '"new york" +pizza', 'york new -crust', '+york new ru*', 'ne* "york cheese"',
               'runn* -"club pasta"', '"york" -ham', "+!! york"]
    options = [{}, {"text_fields": {"name": 2.0, "notes": 0.5}}, {"operator": "and"}, {"text_fields": {"notes": 1.5}}]
    for text in queries:
        for kw in options:
            a, b = mem.find(text=text, **kw), remote.find(text=text, **kw)
            assert same_ranking(a, b), (text, kw, a, b)
            assert remote.count(text=text, **kw) == mem.count(text=text, **kw) == b.total
        for fusion in ("sum", "linear", "rrf"):
            for exact in (True, False):  # five documents: the engine's lists hold them all
                a = mem.find(text=text, vector=[1, 0.2], fusion=fusion, candidates=3, exact=exact)
                b = remote.find(text=text, vector=[1, 0.2], fusion=fusion, candidates=3, exact=exact)
                assert same_ranking(a, b), (text, fusion, exact, a, b)


def test_linear_fusion_sends_both_lists_in_one_msearch(open_da, proxy):
    da = open_da(Dish, hosts=proxy.url)
    da.extend(DISHES)
    n = len(proxy.requests)
    res = da.find(text="york", vector=[1, 0], fusion="linear", weights={"text": 1.0, "vector": 3.0})
    sent = proxy.requests[n:]
    assert [r.path.split("?")[0] for r in sent][:1] == ["/_msearch"] and len(proxy.seen("/_msearch")) == 1
    lexical, knn = sent[0].lines()[1], sent[0].lines()[3]
    assert "multi_match" in json.dumps(lexical) and "knn" in json.dumps(knn)
    exact = da.find(text="york", vector=[1, 0], fusion="linear", weights={"text": 1.0, "vector": 3.0}, exact=True)
    assert res.ids == exact.ids and np.allclose(res.scores, exact.scores)  # five documents: both lists hold all
    assert res.scores[0] <= 4.0 and res.scores[-1] >= 0.0
