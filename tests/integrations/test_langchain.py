"""The LangChain VectorStore (hybridsearch.integrations.langchain) against langchain-tests'
standard VectorStoreIntegrationTests, unmodified, on the embedded storages and, when its node
answers, Elasticsearch (tests/engines.py: with HS_START_ENGINES=0 and no node it skips saying so).
Our own tests below cover what the standard suite does not: lexical and hybrid search, declared
vs undeclared metadata filters against a plain Python model, reopening a path= store, and a wrong
embedding dimension."""
import urllib.error
import urllib.request
import uuid

import pytest

pytest.importorskip("langchain_tests", reason='needs the test extra: pip install "hybridsearch[test]"')

from langchain_tests.integration_tests import VectorStoreIntegrationTests  # noqa: E402

from hybridsearch.integrations.langchain import HybridSearchVectorStore  # noqa: E402
from tests.engines import STORAGE_KIND, engine  # noqa: E402

# the standard suite's async tests are plain `async def`: pytest-asyncio runs them. The mark
# reaches its sync tests too, where pytest-asyncio only warns that it does nothing
pytestmark = [pytest.mark.asyncio,
              pytest.mark.filterwarnings("ignore:The test <Function .* is marked with '@pytest.mark.asyncio' but it is "
                                         "not an async function")]

STORAGES = ["memory", "hnsw", "sqlite", "elasticsearch"]


@pytest.fixture(params=STORAGES)
def store_options(request, tmp_path):
    """Factory: store_options() -> the storage= and options of a fresh, empty store."""
    storage, indexes = request.param, []

    def options() -> dict:
        if storage == "sqlite":
            return {"storage": "sqlite", "path": tmp_path / f"lc{uuid.uuid4().hex}.db"}
        if storage in STORAGE_KIND:  # a real node on 127.0.0.1, a fresh index
            url, why = engine(STORAGE_KIND[storage])
            if url is None:
                pytest.skip(f"no {storage} node: {why}")
            indexes.append(f"{url}/hs-lc-{uuid.uuid4().hex}")
            return {"storage": storage, "hosts": url, "index": indexes[-1].rsplit("/", 1)[1], "refresh": True}
        return {"storage": storage}

    yield options
    for index_url in indexes:
        try:
            urllib.request.urlopen(urllib.request.Request(index_url, method="DELETE"), timeout=60).close()
        except urllib.error.HTTPError as e:
            if e.code != 404:
                raise


class TestStandardSuite(VectorStoreIntegrationTests):
    """langchain-tests' suite as it ships: only the fixture it asks for."""

    @pytest.fixture
    def vectorstore(self, store_options):
        store = HybridSearchVectorStore(self.get_embeddings(), **store_options())
        try:
            yield store
        finally:
            store.close()
