"""Shared fixtures: the storages every shared test runs on.

A later storage joins the whole suite by adding its name to STORAGES (and, if
it needs options such as a path or a server, a line in `make_da`).
"""
import os
import tempfile
import urllib.error
import urllib.request
import uuid

import numpy as np
import pytest

import hybridsearch as hs
from tests.engines import STARTED_FILE_ENV, STORAGE_KIND, WEAVIATE_GRPC, engine, stop_started

STORAGES = ["memory", "memory-path", "memory-rq", "hnswlib", "hnsw", "hnsw-f32", "hnsw-path", "hnsw-disk", "hnsw-rq", "sqlite",
            "elasticsearch",
            "opensearch", "weaviate", "qdrant", "qdrant-path", "qdrant-client", "elasticsearch-cluster",
            "opensearch-cluster"]
# annlite cannot share a process with hnswlib: tests/storages/wrapped/test_annlite.py runs the
# suite again in a child process with HS_TEST_STORAGES=annlite
if os.environ.get("HS_TEST_STORAGES"):
    STORAGES = os.environ["HS_TEST_STORAGES"].split(",")
# the storages that need no server: the files of hostile input, concurrency and crashes run on them
EMBEDDED = ("memory", "memory-path", "memory-rq", "hnswlib", "hnsw", "hnsw-f32", "hnsw-path", "hnsw-disk", "hnsw-rq", "sqlite", "annlite",
            "qdrant", "qdrant-path", "qdrant-client")
# the hnsw variants with files whose float32 vectors stay on disk: their options beyond path=
# (hnsw-rq walks 1-bit RaBitQ codes, the coarsest the storage has)
DISK_OPTIONS = {"hnsw-disk": {"vectors_on_disk": True},
                "hnsw-rq": {"vectors_on_disk": True, "quantization": "rabitq1"}}
# storages whose vector search is exact; approximate ones get recall-based checks
# (qdrant: below `optimize_after` points its segments have no HNSW index and are scanned whole; the
# client's local mode, qdrant-client, is brute force)
# (memory-rq: storage="memory" whose exact scan ranks 1-bit RaBitQ codes first, the same answers)
EXACT_STORAGES = {"memory", "memory-path", "memory-rq", "sqlite", "qdrant", "qdrant-path", "qdrant-client"}


@pytest.fixture(params=STORAGES)
def storage(request):
    return request.param


def storage_fixture(among):
    """A `storage` fixture over this run's STORAGES that are in `among`, for a test module that
    runs on fewer storages than every one: `storage = storage_fixture(EMBEDDED)` there."""
    @pytest.fixture(name="storage", params=[s for s in STORAGES if s in among])
    def chosen(request):
        return request.param
    return chosen


@pytest.fixture
def make_da(storage, tmp_path):
    """Factory: make_da(Schema, **options) -> a fresh DocumentArray on the current storage."""
    opened, remote = [], []

    def make(schema, **options):
        if storage in ("hnsw-path", "memory-path"):  # with its files: every write is logged
            options.setdefault("path", tmp_path / f"collection{len(opened)}")
            da = hs.DocumentArray(schema, storage=storage[:-len("-path")], **options)
        elif storage in DISK_OPTIONS:  # with its files, the float32 vectors in a file (vectors_on_disk)
            options.setdefault("path", tmp_path / f"collection{len(opened)}")
            for k, v in DISK_OPTIONS[storage].items():
                options.setdefault(k, v)
            da = hs.DocumentArray(schema, storage="hnsw", **options)
        elif storage == "memory-rq":  # the exact scan through 1-bit RaBitQ codes (engine/codescan.py)
            options.setdefault("quantization", "rabitq1")
            da = hs.DocumentArray(schema, storage="memory", **options)
        elif storage == "hnsw-f32":  # the hnsw storage walking float32 vectors (default: int8 codes)
            options.setdefault("quantization", None)
            da = hs.DocumentArray(schema, storage="hnsw", **options)
        elif storage == "annlite":
            options.setdefault("path", tmp_path / f"annlite{len(opened)}")
            da = hs.DocumentArray(schema, storage="annlite", **options)
        elif storage == "qdrant-path":  # the embedded shard in a directory the test reopens
            options.setdefault("path", tmp_path / f"qdrant{len(opened)}")
            da = hs.DocumentArray(schema, storage="qdrant", **options)
        elif storage == "qdrant-client":  # the qdrant-client code path, on the client's local mode
            options.setdefault("url", ":memory:")
            da = hs.DocumentArray(schema, storage="qdrant", **options)
        elif storage == "sqlite":
            options.setdefault("path", tmp_path / f"collection{len(opened)}.db")
            da = hs.DocumentArray(schema, storage="sqlite", **options)
        elif storage in STORAGE_KIND:  # a real node on 127.0.0.1 (tests/engines.py), a fresh index
            url, why = engine(STORAGE_KIND[storage])
            if url is None:
                pytest.skip(f"no {storage} node: {why}")
            if storage.endswith("-cluster"):  # three nodes (url: their list): 3 primary shards, 1 replica each
                options.setdefault("shards", 3)
                options.setdefault("replicas", 1)
                # six JVMs beside the suite on two cores: a bulk request can outlast 30 s there
                options.setdefault("timeout", 90)
            options.setdefault("hosts", url)
            options.setdefault("index", f"hs-test-{uuid.uuid4().hex}")
            options.setdefault("refresh", True)  # immediate refresh keeps the suite fast; wait_for is tested apart
            da = hs.DocumentArray(schema, storage=storage.removesuffix("-cluster"), **options)
            remote.append([f"{u}/{options['index']}" for u in (url if isinstance(url, list) else [url])])
        elif storage == "weaviate":  # a real server on 127.0.0.1 (tests/engines.py), a fresh collection
            url, why = engine("weaviate")
            if url is None:
                pytest.skip(f"no weaviate server: {why}")
            options.setdefault("url", url)
            options.setdefault("grpc_port", WEAVIATE_GRPC)
            options.setdefault("collection", f"HsTest{uuid.uuid4().hex}")
            da = hs.DocumentArray(schema, storage="weaviate", **options)
            remote.append([f"{url}/v1/schema/{options['collection']}"])
        else:
            da = hs.DocumentArray(schema, storage=storage, **options)
        opened.append(da)
        return da

    yield make
    for index_urls in remote:  # drop the test's index over HTTP (the test may have closed da)
        for n, index_url in enumerate(index_urls):  # a cluster: through the first node that answers
            try:
                urllib.request.urlopen(urllib.request.Request(index_url, method="DELETE"), timeout=60).close()
            except urllib.error.HTTPError as e:
                if e.code != 404:  # already gone is fine
                    raise
            except urllib.error.URLError:
                if n + 1 < len(index_urls):
                    continue
                raise
            break
    for da in opened:
        da.close()


# storages where a fresh collection costs an index creation (a remote node's index, an embedded
# qdrant shard, annlite's files): a hypothesis test whose examples each need an EMPTY collection
# (not a new one) gets one per test from `empty_da`, emptied by delete(filter={}) between examples
# (the three-node clusters keep a new index per example: reusing one there once saw a search
# return two documents that delete(filter={}) had just deleted while count() said 0, on a node
# the client had put on timeout; left for its own test, see tests/README.md)
SLOW_TO_CREATE = {"elasticsearch", "opensearch", "weaviate", "qdrant", "qdrant-path", "annlite"}


@pytest.fixture
def empty_da(make_da, storage):
    """Factory: empty_da(Schema) -> an empty DocumentArray on the current storage: a new one where
    creating is cheap, else the test's previous one of that schema emptied (which also exercises
    deleting everything and writing again). For examples that do not depend on what an engine
    keeps of deleted documents (BM25 statistics): filters, CRUD order, columns."""
    kept: dict = {}

    def get(schema):
        if storage not in SLOW_TO_CREATE:
            return make_da(schema)
        da = kept.get(schema)
        if da is None:
            da = kept[schema] = make_da(schema)
        else:
            da.delete(filter={})
            assert len(da) == 0 and da.find(filter={}, limit=None).ids == []
        return da
    return get


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


WORKERS_ENV = "HS_TEST_WORKERS"


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """The suite runs on parallel workers (pytest-xdist, a test dependency) unless told otherwise:
    `-n N` / `-n 0` on the command line, or HS_TEST_WORKERS=N (0: one process). Without xdist it
    runs in one process. Independent files then share the machine's cores while a test waits on
    a remote node, a child process or a file lock (tests/README.md)."""
    if not config.pluginmanager.hasplugin("xdist") or hasattr(config, "workerinput"):
        return
    if config.option.numprocesses is None and not config.option.collectonly:
        workers = os.environ.get(WORKERS_ENV, "auto")
        config.option.numprocesses = workers if workers in ("auto", "logical") else int(workers)
        if config.option.dist == "no":
            config.option.dist = "worksteal"  # test durations vary from milliseconds to minutes


def pytest_configure(config):
    """The controller of a parallel run (pytest-xdist) names the file its workers record the
    nodes they start in; the workers inherit it through the environment."""
    if not hasattr(config, "workerinput") and getattr(config.option, "numprocesses", None):
        fd, name = tempfile.mkstemp(prefix="hs-started-", suffix=".txt")
        os.close(fd)
        os.environ[STARTED_FILE_ENV] = name


def pytest_sessionfinish(session, exitstatus):
    """Search nodes the tests started are stopped: no JVM outlives the test run. In a parallel
    run only the controller stops them, after every worker has finished."""
    if not hasattr(session.config, "workerinput"):
        stop_started()
