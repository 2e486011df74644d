"""DocumentArray(..., mode="create" | "open" | "either") (issue 31 item 4), on every storage
with path=: the model is what is at the path (nothing, or the documents written before); a
refused call changes neither. Public API only."""
import os

import pytest

import hybridsearch as hs


class P(hs.Document):
    title: hs.Text = ""
    emb: hs.Vector[2]


PATH_STORAGES = ["memory", "hnsw", "sqlite", "qdrant"]
DOCS = [{"id": "a", "title": "one", "emb": [1, 0]}, {"id": "b", "title": "two", "emb": [0, 1]}]


def _path(storage, tmp_path):
    return str(tmp_path / ("c.db" if storage == "sqlite" else "c"))


def _held(storage, path):
    with hs.DocumentArray(P, storage=storage, path=path) as da:
        return sorted(d.id for d in da)


@pytest.mark.parametrize("storage", PATH_STORAGES)
def test_open_refuses_a_path_without_a_collection_and_creates_nothing(storage, tmp_path):
    path = _path(storage, tmp_path)
    with pytest.raises(hs.ConfigError, match="mode='open': no collection at"):
        hs.DocumentArray(P, storage=storage, path=path, mode="open")
    assert not os.path.exists(path)


@pytest.mark.parametrize("storage", PATH_STORAGES)
def test_create_then_open_then_create_again(storage, tmp_path):
    path = _path(storage, tmp_path)
    with hs.DocumentArray(P, storage=storage, path=path, mode="create") as da:
        da.extend(DOCS)
    with hs.DocumentArray(P, storage=storage, path=path, mode="open") as da:
        assert sorted(d.id for d in da) == ["a", "b"]
        da.extend([{"id": "c", "emb": [1, 1]}])
    with pytest.raises(hs.ConfigError, match="mode='create': a collection already exists"):
        hs.DocumentArray(P, storage=storage, path=path, mode="create")
    assert _held(storage, path) == ["a", "b", "c"]  # the refused create left it untouched
    with hs.DocumentArray(P, storage=storage, path=path, mode="either") as da:
        assert len(da) == 3


@pytest.mark.parametrize("storage", [s for s in PATH_STORAGES if s != "sqlite"])  # sqlite: a file
def test_an_empty_directory_holds_no_collection(storage, tmp_path):
    path = _path(storage, tmp_path)
    os.makedirs(path)
    with hs.DocumentArray(P, storage=storage, path=path, mode="create") as da:
        da.extend(DOCS[:1])
    assert _held(storage, path) == ["a"]


def test_without_a_path_create_is_a_new_collection_and_open_has_nothing_to_open():
    with hs.DocumentArray(P, mode="create") as da:
        assert len(da) == 0
    with pytest.raises(hs.ConfigError, match="mode='open' needs path="):
        hs.DocumentArray(P, storage="hnsw", mode="open")


@pytest.mark.parametrize("mode", ["new", "overwrite", None, 1, "OPEN"])
def test_an_unknown_mode_is_a_config_error(mode, tmp_path):
    with pytest.raises(hs.ConfigError, match="mode must be one of 'either', 'create', 'open'"):
        hs.DocumentArray(P, storage="sqlite", path=str(tmp_path / "x.db"), mode=mode)
    assert not os.path.exists(tmp_path / "x.db")


def test_a_remote_collection_says_the_mode_is_not_available_yet():
    # vespa only (the other remote storages settle the mode: test_open_mode_remote.py)
    with pytest.raises(hs.UnsupportedError, match="not available on storage 'vespa'"):
        hs.DocumentArray(P, storage="vespa", url="http://127.0.0.1:9", mode="create")
    with hs.DocumentArray(P, storage="qdrant", url=":memory:", mode="either") as da:  # the default works
        da.extend(DOCS)
        assert len(da) == 2
