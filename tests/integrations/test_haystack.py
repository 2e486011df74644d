"""The Haystack DocumentStore (hybridsearch.integrations.haystack) against Haystack's own standard
test classes (haystack.testing.document_store, run unmodified: these subclasses only give the
fixture they ask for, and the one test the suite asks every store to write, default-policy
writes), on memory, hnsw, sqlite, hnswlib and a real Elasticsearch node when one answers.

"memory-undeclared" runs the suite with no declared metadata fields (every filter answered in
Python over the stored metadata); the other storages declare the fields the suite filters on,
so the comparisons on them run in the storage. What the suite does not cover (retrievers in a
pipeline, declared and undeclared filters against a plain model, reopening, errors) is in
test_haystack_store.py.
"""
import urllib.error
import urllib.request
import uuid

import pytest

pytest.importorskip("haystack", reason='needs the extra "haystack": pip install "hybridsearch[haystack]"')

from haystack.dataclasses import Document  # noqa: E402
from haystack.document_stores.errors import DuplicateDocumentError  # noqa: E402
from haystack.testing.document_store import (CountDocumentsByFilterTest, CountUniqueMetadataByFilterTest,  # noqa: E402
                                             DocumentStoreBaseExtendedTests, GetMetadataFieldMinMaxTest,
                                             GetMetadataFieldsInfoTest, GetMetadataFieldUniqueValuesTest)
from haystack.testing.document_store_async import (CountDocumentsAsyncTest,  # noqa: E402
                                                   CountDocumentsByFilterAsyncTest,
                                                   CountUniqueMetadataByFilterAsyncTest, DeleteAllAsyncTest,
                                                   DeleteByFilterAsyncTest, DeleteDocumentsAsyncTest,
                                                   FilterDocumentsAsyncTest, GetMetadataFieldMinMaxAsyncTest,
                                                   GetMetadataFieldsInfoAsyncTest,
                                                   GetMetadataFieldUniqueValuesAsyncTest, UpdateByFilterAsyncTest,
                                                   WriteDocumentsAsyncTest)

from hybridsearch.integrations.haystack import HybridSearchDocumentStore  # noqa: E402
from tests.engines import engine  # noqa: E402

# the metadata keys the standard suite filters on, as typed columns (the rest stay in Python)
DECLARED = {"number": int, "name": str, "chapter": str, "category": str, "year": int, "status": str,
            "rating": float}
# qdrant passes too (run by hand: add it here), but opening an embedded shard per test costs
# ~85 s for the suite on two busy cores, beyond this file's budget
STORES = ["memory-undeclared", "memory", "hnsw", "sqlite", "hnswlib", "elasticsearch"]


def open_store(kind: str, tmp_path) -> HybridSearchDocumentStore:
    """A fresh store of this kind (the suite's embeddings have 768 dimensions); a remote one's
    index URL is kept in `store.test_index_url` for the fixture to drop."""
    if kind == "memory-undeclared":
        store = HybridSearchDocumentStore("memory", embedding_dim=768)
        store.test_index_url = None
        return store
    options = {}
    if kind == "sqlite":
        options["path"] = tmp_path / "haystack.db"
    elif kind == "elasticsearch":
        url, why = engine("es")
        if url is None:
            pytest.skip(f"no elasticsearch node: {why}")
        options.update(hosts=url, index=f"hs-haystack-{uuid.uuid4().hex}", refresh=True)
    store = HybridSearchDocumentStore(kind, embedding_dim=768, metadata_fields=DECLARED, **options)
    store.test_index_url = f"{options['hosts']}/{options['index']}" if kind == "elasticsearch" else None
    return store


def drop_index(url: str) -> None:
    """Delete a test's index from the node (already gone is fine)."""
    try:
        urllib.request.urlopen(urllib.request.Request(url, method="DELETE"), timeout=60).close()
    except urllib.error.HTTPError as e:
        if e.code != 404:
            raise


@pytest.fixture(params=STORES)
def store_kind(request):
    return request.param


@pytest.fixture
def document_store(store_kind, tmp_path):
    store = open_store(store_kind, tmp_path)
    yield store
    store.close()
    if store.test_index_url:
        drop_index(store.test_index_url)


class TestStandardSuite(DocumentStoreBaseExtendedTests, CountDocumentsByFilterTest, CountUniqueMetadataByFilterTest,
                        GetMetadataFieldsInfoTest, GetMetadataFieldMinMaxTest, GetMetadataFieldUniqueValuesTest):
    """Every synchronous standard test class of haystack.testing.document_store."""

    @pytest.fixture
    def document_store(self, document_store):
        return document_store

    def test_write_documents(self, document_store):
        """The suite leaves the default policy to each store: ours (NONE) refuses a stored id, like FAIL."""
        doc = Document(content="test doc")
        assert document_store.write_documents([doc]) == 1
        with pytest.raises(DuplicateDocumentError):
            document_store.write_documents([doc])
        self.assert_documents_are_equal(document_store.filter_documents(), [doc])


class TestStandardAsyncSuite(CountDocumentsAsyncTest, WriteDocumentsAsyncTest, DeleteDocumentsAsyncTest,
                             FilterDocumentsAsyncTest, DeleteAllAsyncTest, DeleteByFilterAsyncTest,
                             UpdateByFilterAsyncTest, CountDocumentsByFilterAsyncTest,
                             CountUniqueMetadataByFilterAsyncTest, GetMetadataFieldsInfoAsyncTest,
                             GetMetadataFieldMinMaxAsyncTest, GetMetadataFieldUniqueValuesAsyncTest):
    """Every asynchronous standard test class of haystack.testing.document_store_async."""

    @pytest.fixture
    def document_store(self, document_store):
        return document_store

    @pytest.mark.asyncio
    async def test_write_documents_async(self, document_store):
        """As test_write_documents, through write_documents_async."""
        doc = Document(content="test doc")
        assert await document_store.write_documents_async([doc]) == 1
        with pytest.raises(DuplicateDocumentError):
            await document_store.write_documents_async([doc])
        self.assert_documents_are_equal(await document_store.filter_documents_async(), [doc])
