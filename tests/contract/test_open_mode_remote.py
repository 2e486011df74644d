"""mode="create" | "open" | "either" on the remote storages (issue 31 item 4, API.md section 2):
the model is whether the index / collection of that name exists on the engine (nothing, or the
documents written before); a refused call creates nothing and changes nothing. Elasticsearch,
OpenSearch and Weaviate run on the suite's nodes (tests/engines.py: skipped when none answers);
Qdrant's url= path runs on qdrant-client's local mode ("local:DIR" keeps a collection between
opens). Vespa keeps UnsupportedError: its schema is deployed outside the library. Public API only."""
import uuid

import pytest

import hybridsearch as hs
from tests.conftest import storage_fixture

storage = storage_fixture(("elasticsearch", "opensearch", "weaviate"))


class P(hs.Document):
    title: hs.Text = ""
    emb: hs.Vector[2]


DOCS = [{"id": "a", "title": "one", "emb": [1, 0]}, {"id": "b", "title": "two", "emb": [0, 1]}]


def _name_option(storage):
    """The option naming the collection and a fresh name for it."""
    if storage == "weaviate":
        return "collection", f"HsTestMode{uuid.uuid4().hex}"
    return "index", f"hs-test-mode-{uuid.uuid4().hex}"


def _ids(da):
    return sorted(d.id for d in da)


def test_remote_open_create_either(make_da, storage):
    key, name = _name_option(storage)
    with pytest.raises(hs.ConfigError, match=f"mode='open': the .*{name}.* does not exist"):
        make_da(P, **{key: name}, mode="open")
    da = make_da(P, **{key: name}, mode="create")  # succeeds: the refused open created nothing
    da.extend(DOCS)
    da.close()
    with pytest.raises(hs.ConfigError, match=f"mode='create': the .*{name}.* already exists"):
        make_da(P, **{key: name}, mode="create")
    again = make_da(P, **{key: name}, mode="open")
    assert _ids(again) == ["a", "b"]  # the refused create left it as it was
    again.extend([{"id": "c", "emb": [1, 1]}])
    again.close()
    assert _ids(make_da(P, **{key: name}, mode="either")) == ["a", "b", "c"]
    assert _ids(make_da(P, **{key: name})) == ["a", "b", "c"]  # "either" is the default


def test_qdrant_url_open_create_either(tmp_path):
    url = f"local:{tmp_path / 'q'}"
    with pytest.raises(hs.ConfigError, match="mode='open': the Qdrant collection 'p' does not exist"):
        hs.DocumentArray(P, storage="qdrant", url=url, mode="open")
    with hs.DocumentArray(P, storage="qdrant", url=url, mode="create") as da:
        da.extend(DOCS)
    with pytest.raises(hs.ConfigError, match="mode='create': the Qdrant collection 'p' already exists"):
        hs.DocumentArray(P, storage="qdrant", url=url, mode="create")
    with hs.DocumentArray(P, storage="qdrant", url=url, mode="open") as da:
        assert _ids(da) == ["a", "b"]
        da.extend([{"id": "c", "emb": [1, 1]}])
    with pytest.raises(hs.ConfigError, match="'other' does not exist"):  # another name on the same server
        hs.DocumentArray(P, storage="qdrant", url=url, collection="other", mode="open")
    with hs.DocumentArray(P, storage="qdrant", url=url) as da:
        assert _ids(da) == ["a", "b", "c"]
    with hs.DocumentArray(P, storage="qdrant", url=url, collection="other", mode="create") as da:
        assert len(da) == 0  # the refused open of "other" created nothing


def test_qdrant_client_memory_mode_starts_empty():
    with pytest.raises(hs.ConfigError, match=":memory: mode starts empty"):
        hs.DocumentArray(P, storage="qdrant", url=":memory:", mode="open")
    with hs.DocumentArray(P, storage="qdrant", url=":memory:", mode="create") as da:
        da.extend(DOCS)
        assert _ids(da) == ["a", "b"]


@pytest.mark.parametrize("mode", ["create", "open"])
def test_vespa_says_why_it_takes_either_only(mode):
    # refused before any request: no Vespa node is needed (port 9 answers nothing)
    with pytest.raises(hs.UnsupportedError, match="deployed with the application package"):
        hs.DocumentArray(P, storage="vespa", url="http://127.0.0.1:9", mode=mode)
