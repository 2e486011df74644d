"""Errors typed as the README promises (issue 31 item 4): a non-string id is a SchemaError with a
sentence, every call on a closed collection raises hs.ClosedError, and find() argument mix-ups
name the spelling the caller meant. Public API only."""
import numpy as np
import pytest

import hybridsearch as hs
from tests.conftest import EMBEDDED, storage_fixture

storage = storage_fixture(EMBEDDED)


class Item(hs.Document):
    title: hs.Text = ""
    tag: hs.Keyword = "a"
    emb: hs.Vector[3]


DOCS = [{"id": f"d{i}", "title": f"blue item {i}", "tag": "ab"[i % 2], "emb": [1.0, i, 0.5]} for i in range(6)]

# every public call of a DocumentArray after close(), by name: the set is compared with the class
# below, so a method added later is listed here or the test fails
AFTER_CLOSE = {
    "__len__": lambda da: len(da),
    "__contains__": lambda da: "d1" in da,
    "__iter__": lambda da: list(da),
    "__getitem__": lambda da: da["d1"],
    "__setitem__": lambda da: da.__setitem__("d1", DOCS[1]),
    "__delitem__": lambda da: da.__delitem__("d1"),
    "extend": lambda da: da.extend(DOCS[:1]),
    "append": lambda da: da.append(DOCS[0]),
    "extend_columns": lambda da: da.extend_columns({"id": ["x"], "emb": np.ones((1, 3))}),
    "update": lambda da: da.update("d1", tag="b"),
    "update_many": lambda da: da.update_many({"tag": "a"}, tag="b"),
    "delete": lambda da: da.delete(["d1"]),
    "find": lambda da: da.find(vector=[1.0, 0.0, 0.0], limit=2),
    "find_batched": lambda da: da.find_batched(np.ones((2, 3)), limit=2),
    "count": lambda da: da.count(),
    "facets": lambda da: da.facets("tag"),
    "stats": lambda da: da.stats(),
    "to_columns": lambda da: da.to_columns(),
    "to_pandas": lambda da: da.to_pandas(),
    "to_arrow": lambda da: da.to_arrow(),
    "backup": lambda da: da.backup("never-written"),  # refused before anything is written
    "refresh": lambda da: da.refresh(),
}
# public names that keep working after close(): what the handle is, not what it holds
STILL_FINE = {"close", "schema", "storage", "__enter__", "__exit__", "__repr__"}


def test_every_public_call_is_listed():
    public = {n for n in vars(hs.DocumentArray) if not n.startswith("_") or n in AFTER_CLOSE or n in STILL_FINE}
    public -= {"__init__", "__module__", "__doc__", "__dict__", "__weakref__", "__orig_bases__", "__parameters__",
               "__annotations__", "__class_getitem__", "__init_subclass__"}
    assert public == set(AFTER_CLOSE) | STILL_FINE


@pytest.mark.parametrize("call", sorted(AFTER_CLOSE))
def test_every_call_after_close_raises_closed_error(make_da, call):
    da = make_da(Item)
    da.extend(DOCS)
    da.close()
    with pytest.raises(hs.ClosedError, match="closed"):
        AFTER_CLOSE[call](da)
    assert issubclass(hs.ClosedError, hs.HybridSearchError)
    assert "closed" in repr(da) and da.storage and da.schema is Item  # the handle still says what it is
    da.close()  # closing twice is fine


def test_the_data_outlives_a_closed_handle(tmp_path):
    with hs.DocumentArray(Item, storage="sqlite", path=tmp_path / "c.db") as da:
        da.extend(DOCS)
    with pytest.raises(hs.ClosedError):
        da.delete(["d1"])
    with hs.DocumentArray(Item, storage="sqlite", path=tmp_path / "c.db") as again:
        assert sorted(d.id for d in again) == sorted(d["id"] for d in DOCS)


@pytest.mark.parametrize("bad", [5, 1.5, None, b"d1", ("d1",)])
@pytest.mark.parametrize("call", ["getitem", "setitem", "delitem", "update", "delete"])
@pytest.mark.parametrize("kind", ["memory", "sqlite"])  # the check is the API's, before any storage
def test_a_non_string_id_is_a_schema_error_with_a_sentence(tmp_path, kind, bad, call):
    da = hs.DocumentArray(Item, storage=kind, **({"path": tmp_path / "c.db"} if kind == "sqlite" else {}))
    da.extend(DOCS)
    calls = {"getitem": lambda: da[bad], "setitem": lambda: da.__setitem__(bad, DOCS[0]),
             "delitem": lambda: da.__delitem__(bad), "update": lambda: da.update(bad, tag="b"),
             "delete": lambda: da.delete([bad])}
    with pytest.raises(hs.SchemaError, match="ids are strings") as e:
        calls[call]()
    assert type(bad).__name__ in str(e.value)
    assert sorted(d.id for d in da) == sorted(d["id"] for d in DOCS)  # nothing written


def test_delete_of_a_non_iterable_is_a_schema_error(make_da):
    da = make_da(Item)
    da.extend(DOCS)
    with pytest.raises(hs.SchemaError, match="delete\\(\\) takes an id"):
        da.delete(5)
    assert len(da) == len(DOCS)


def test_a_number_id_hints_its_string():
    da = hs.DocumentArray(Item)
    da.extend(DOCS)
    with pytest.raises(hs.SchemaError, match="did you mean '3'"):
        da[3]


def test_find_with_a_string_for_a_vector_hints_text(make_da):
    da = make_da(Item)
    da.extend(DOCS)
    for call in (lambda: da.find("blue"), lambda: da.find(vector="blue", limit=3)):
        with pytest.raises(hs.SchemaError, match=r"did you mean find\(text='blue'\)\?"):
            call()


@pytest.mark.parametrize("vec", [[1.0, 0.0, 0.0], np.ones(3), (1, 2, 3)])
def test_find_with_a_vector_for_text_hints_vector(vec):
    da = hs.DocumentArray(Item)
    da.extend(DOCS)
    with pytest.raises(hs.ConfigError, match="did you mean vector="):
        da.find(text=vec)


def test_find_with_a_non_text_non_vector_for_text_gives_no_wrong_hint():
    da = hs.DocumentArray(Item)
    with pytest.raises(hs.ConfigError) as e:
        da.find(text={"a": 1})
    assert "did you mean" not in str(e.value)


@pytest.mark.parametrize("wrong, meant", [("txt", "text"), ("vectr", "vector"), ("limt", "limit"),
                                          ("filters", "filter"), ("minscore", "min_score")])
def test_find_with_a_misspelt_keyword_names_the_nearest(wrong, meant):
    da = hs.DocumentArray(Item)
    da.extend(DOCS)
    with pytest.raises(hs.ConfigError, match=f"no argument '{wrong}': did you mean {meant}=\\?"):
        da.find(**{wrong: "blue"})


def test_find_with_an_unrelated_keyword_lists_the_arguments():
    da = hs.DocumentArray(Item)
    with pytest.raises(hs.ConfigError, match="no argument 'zzzzzz' \\(its arguments: vector, text"):
        da.find(zzzzzz=1)
