"""Embedding functions (API.md section 12, issue 31 item 1): hs.embedded vector fields computed
on write, batched, checked, nothing written on failure; find(text=..., vector="auto"); the
function's identity recorded with a stored collection.

The fake functions here are deterministic: `reference(text)` (a hashed bag of words) is the
plain model a stored vector must equal. Public API only."""
import hashlib
from typing import Optional

import numpy as np
import pytest

import hybridsearch as hs
from tests.conftest import storage_fixture
from tests.models import check_topk, exact_scores

storage = storage_fixture(("memory", "memory-path", "hnsw", "hnsw-path", "sqlite"))
DIM = 16


def reference(text: str, dim: int = DIM, seed: str = "") -> np.ndarray:
    """The plain model of the fake function: each word adds a hashed +-1 pattern; normalised."""
    v = np.zeros(dim)
    for word in text.lower().split():
        h = hashlib.sha256((seed + word).encode()).digest()
        v += np.array([1.0 if h[i % 32] & (1 << (i // 32)) else -1.0 for i in range(dim)])
    n = np.linalg.norm(v)
    return (v / n if n else v).astype(np.float32)


class Fake(hs.EmbeddingFunction):
    """Counts its calls; `fail_on` the call number that raises, `bad` what the output gets wrong."""

    name = "fake"

    def __init__(self, model="bag-v1", dimension=DIM, batch_size=4, fail_on=None, bad=None):
        self.model, self.dimension, self.batch_size = model, dimension, batch_size
        self.calls, self.fail_on, self.bad = [], fail_on, bad

    def embed_documents(self, texts):
        self.calls.append(list(texts))
        if self.fail_on == len(self.calls):
            raise RuntimeError("model server went away")
        out = np.stack([reference(t, self.dimension, self.model) for t in texts])
        if len(self.calls) in (self.bad or ()):
            return {"shape": out[:, :-1], "count": out[:-1], "nan": np.where(out == out[0, 0], np.nan, out),
                    "norm": out * 1e20, "type": "not vectors"}[self.kind_of_bad]
        return out

    kind_of_bad = "shape"


def fn_schema(fn, dim=DIM):
    class Article(hs.Document):
        title: hs.Text = ""
        body: hs.Text = ""
        tag: hs.Keyword = "a"
        emb: hs.Vector[dim] = hs.embedded("title", "body", fn=fn)
    return Article


def texts_of(n, start=0):
    words = "red green blue cable phone case usb charger lamp desk".split()
    return [{"id": f"d{i}", "title": f"{words[i % 10]} {words[(i * 3) % 10]}", "body": f"{words[(i * 7) % 10]} item {i}"}
            for i in range(start, start + n)]


def stored(da, id):
    return np.asarray(da[id].emb)


def test_extend_embeds_missing_vectors_in_batches(make_da):
    fn = Fake(batch_size=4)
    Article = fn_schema(fn)
    da = make_da(Article)
    docs = texts_of(10)
    given = reference("given vector", DIM, "other")
    docs[3]["emb"] = given  # a document with its vector keeps it, and is not embedded
    docs[5] = Article(**docs[5])  # a Document object without the field
    da.extend(docs)
    want_texts = [f"{d['title']}\n{d['body']}" if isinstance(d, dict) else f"{d.title}\n{d.body}" for d in docs]
    want_texts = [t for i, t in enumerate(want_texts) if i != 3]
    assert fn.calls == [want_texts[0:4], want_texts[4:8], want_texts[8:9]]  # one call per batch of 4
    assert len(da) == 10
    for i, d in enumerate(docs):
        id = d["id"] if isinstance(d, dict) else d.id
        want = given if i == 3 else reference(want_texts[i - (i > 3)], DIM, fn.model)
        np.testing.assert_array_equal(stored(da, id), want)


def test_append_setitem_and_one_source_missing(make_da):
    fn = Fake()
    da = make_da(fn_schema(fn))
    da.append({"id": "a", "title": "red lamp"})  # body "" : only the title is embedded
    da["b"] = {"title": "", "body": "blue desk"}
    np.testing.assert_array_equal(stored(da, "a"), reference("red lamp", DIM, fn.model))
    np.testing.assert_array_equal(stored(da, "b"), reference("blue desk", DIM, fn.model))
    assert fn.calls == [["red lamp"], ["blue desk"]]
    with pytest.raises(hs.SchemaError, match="neither emb nor text"):
        da.extend([{"id": "c", "title": "x"}, {"id": "d"}])  # nothing to embed d from
    assert len(da) == 2 and "c" not in da


def test_extend_columns_embeds_missing_column_and_rows(make_da):
    fn = Fake(batch_size=3)
    da = make_da(fn_schema(fn))
    docs = texts_of(7)
    da.extend_columns({k: [d[k] for d in docs] for k in ("id", "title", "body")})
    assert [len(c) for c in fn.calls] == [3, 3, 1]
    given = reference("given", DIM, "other")
    more = texts_of(4, start=7)
    da.extend_columns({"id": [d["id"] for d in more], "title": [d["title"] for d in more],
                       "body": [d["body"] for d in more], "emb": [None, given, None, None]})
    assert [len(c) for c in fn.calls] == [3, 3, 1, 3]  # three rows held None
    for d in docs + more:
        want = given if d["id"] == "d8" else reference(f"{d['title']}\n{d['body']}", DIM, fn.model)
        np.testing.assert_array_equal(stored(da, d["id"]), want)
    cols = da.to_columns(["id", "emb"])
    assert cols["emb"].shape == (11, DIM)


def test_extend_columns_without_a_source_column_is_refused(make_da):
    fn = Fake()
    da = make_da(fn_schema(fn))
    with pytest.raises(hs.SchemaError, match="give the column 'body'"):
        da.extend_columns({"id": ["a"], "title": ["red"]})
    with pytest.raises(hs.SchemaError, match="not a string"):
        da.extend_columns({"id": ["a"], "title": [3], "body": ["x"]})
    assert len(da) == 0 and fn.calls == []


@pytest.mark.parametrize("bad", ["shape", "count", "nan", "norm", "type"])
def test_a_bad_model_output_writes_nothing(make_da, bad):
    fn = Fake(batch_size=4, bad={2, 4})  # call 1: the first extend; then the 2nd batch of each write
    fn.kind_of_bad = bad
    da = make_da(fn_schema(fn))
    da.extend(texts_of(3, start=100))
    before = {d.id: np.asarray(d.emb).copy() for d in da}
    with pytest.raises(hs.EmbeddingError, match="nothing was written"):
        da.extend(texts_of(10))  # call 2, its second batch of four, is bad
    with pytest.raises(hs.EmbeddingError):
        da.extend_columns({k: [d[k] for d in texts_of(10)] for k in ("id", "title", "body")})
    assert len(da) == 3 and {d.id: np.asarray(d.emb) for d in da}.keys() == before.keys()
    for d in da:
        np.testing.assert_array_equal(np.asarray(d.emb), before[d.id])


def test_a_failing_model_writes_nothing(make_da):
    fn = Fake(batch_size=4, fail_on=3)  # the first extend is call 1; the second fails on its 2nd batch
    da = make_da(fn_schema(fn))
    da.extend(texts_of(2, start=50))
    with pytest.raises(hs.EmbeddingError, match="model server went away") as info:
        da.extend(texts_of(6))
    assert isinstance(info.value.__cause__, RuntimeError)
    assert sorted(d.id for d in da) == ["d50", "d51"]


def test_find_auto_is_hybrid_with_the_embedded_query(make_da):
    fn = Fake()
    da = make_da(fn_schema(fn))
    da.extend(texts_of(40))
    for q in ("red cable", "usb charger item", "lamp"):
        got = da.find(text=q, vector="auto", limit=5, exact=True)
        want = da.find(text=q, vector={"emb": reference(q, DIM, fn.model)}, limit=5, exact=True)
        assert got.ids == want.ids
        np.testing.assert_allclose(got.scores, want.scores, rtol=1e-6)
        assert set(got.part_scores) == {"text", "emb"}
    assert fn.calls[-1] == ["lamp"]  # the query goes through embed_query -> embed_documents([text])


def test_find_auto_without_text_fields_is_a_vector_search(make_da):
    fn = Fake(dimension=8)

    class Tagged(hs.Document):
        tag: hs.Keyword = ""
        emb: Optional[hs.Vector[8]] = hs.embedded("tag", fn=fn)

    da = make_da(Tagged)
    tags = [f"tag{i % 13} colour{i % 5}" for i in range(60)]
    da.extend([{"id": str(i), "tag": t} for i, t in enumerate(tags)])
    X = np.stack([reference(t, 8, fn.model) for t in tags])
    for q in ("tag3 colour1", "colour4"):
        res = da.find(text=q, vector="auto", limit=7, exact=True)
        check_topk(res.ids, res.scores, [str(i) for i in range(60)], exact_scores(X, reference(q, 8, fn.model), "cosine"), 7)


def test_find_auto_refusals(make_da):
    fn = Fake()
    da = make_da(fn_schema(fn))
    da.extend(texts_of(3))
    with pytest.raises(hs.ConfigError, match="give text= a string"):
        da.find(vector="auto")
    plain = make_da(_Plain)
    with pytest.raises(hs.ConfigError, match="has none"):
        plain.find(text="x", vector="auto")
    failing = Fake(fail_on=2)
    da2 = make_da(fn_schema(failing))
    da2.extend(texts_of(2))
    with pytest.raises(hs.EmbeddingError, match="the query"):
        da2.find(text="red", vector="auto")


class _Plain(hs.Document):
    title: hs.Text = ""
    emb: hs.Vector[DIM]


def test_update_recomputes_from_changed_sources(make_da):
    fn = Fake()
    da = make_da(fn_schema(fn))
    da.extend(texts_of(3))
    da.update("d1", title="brand new words")
    np.testing.assert_array_equal(stored(da, "d1"), reference(f"brand new words\n{texts_of(2)[1]['body']}", DIM,
                                                                  fn.model))
    own = reference("own", DIM, "x")
    da.update("d2", title="changed", emb=own)  # the vector given too: kept
    np.testing.assert_array_equal(stored(da, "d2"), own)
    calls = len(fn.calls)
    da.update("d0", tag="b")  # no source changed: no call
    assert len(fn.calls) == calls
    with pytest.raises(hs.UnsupportedError, match="update_many"):
        da.update_many({"tag": "a"}, title="all the same")
    assert da["d0"].title == texts_of(1)[0]["title"]


def test_schema_mistakes():
    fn = Fake()
    with pytest.raises(hs.SchemaError, match="'nope', which is not a field"):
        class A(hs.Document):
            emb: hs.Vector[DIM] = hs.embedded("nope", fn=fn)
    with pytest.raises(hs.SchemaError, match="makes 16-dimensional vectors, the field holds 8"):
        class B(hs.Document):
            title: hs.Text = ""
            emb: hs.Vector[8] = hs.embedded("title", fn=fn)
    with pytest.raises(hs.SchemaError, match="not a int field|is a int field"):
        class C(hs.Document):
            n: int = 0
            emb: hs.Vector[DIM] = hs.embedded("n", fn=fn)
    with pytest.raises(hs.SchemaError, match="declares a vector field"):
        class D(hs.Document):
            title: hs.Text = ""
            other: hs.Text = hs.embedded("title", fn=fn)
    with pytest.raises(hs.ConfigError, match="embedding function"):
        hs.embedded("title", fn=lambda texts: texts)
    with pytest.raises(hs.SchemaError, match="names of one or more text fields"):
        hs.embedded(fn=fn)


@pytest.mark.parametrize("name", ["memory", "hnsw", "sqlite"])
def test_reopen_checks_the_identity(name, tmp_path):
    path = tmp_path / ("c.db" if name == "sqlite" else "c")
    fn = Fake(model="bag-v1")
    with hs.DocumentArray(fn_schema(fn), storage=name, path=path) as da:
        da.extend(texts_of(5))
    with pytest.raises(hs.ConfigError, match="bag-v1.*bag-v2"):
        hs.DocumentArray(fn_schema(Fake(model="bag-v2")), storage=name, path=path)
    with pytest.raises(hs.ConfigError, match="dimension 16.*dimension 8"):
        hs.DocumentArray(fn_schema(Fake(model="bag-v1", dimension=8), dim=8), storage=name, path=path)
    with hs.DocumentArray(fn_schema(Fake(model="bag-v1")), storage=name, path=path) as da:
        assert len(da) == 5  # the same function opens it, the data intact
        np.testing.assert_array_equal(stored(da, "d1"), reference(f"{texts_of(2)[1]['title']}\n{texts_of(2)[1]['body']}",
                                                                      DIM, "bag-v1"))


class SparseFake(hs.EmbeddingFunction):
    name, model, dimension, kind, batch_size = "sparse-fake", "crc", 0, "sparse", 3

    def embed_documents(self, texts):
        return [sparse_reference(t) for t in texts]


def sparse_reference(text):
    """The plain model: each word's hashed key, weight = its count."""
    out = {}
    for w in text.split():
        k = int(hashlib.sha256(w.encode()).hexdigest(), 16) % 5000
        out[k] = out.get(k, 0.0) + 1.0
    return dict(sorted(out.items()))


class MultiFake(hs.EmbeddingFunction):
    name, model, dimension, kind, batch_size = "multi-fake", "words", 4, "multi", 3

    def embed_documents(self, texts):
        return [multi_reference(t) for t in texts]


def multi_reference(text):
    """The plain model: one token row per word (its first 4 bytes of sha256, scaled)."""
    return np.array([[1 + b / 64 for b in hashlib.sha256(w.encode()).digest()[:4]] for w in text.split()],
                    dtype=np.float32)


def test_sparse_and_multi_vector_functions(make_da):
    class Both(hs.Document):
        title: hs.Text = ""
        sp: hs.SparseVector = hs.embedded("title", fn=SparseFake())
        mv: Optional[hs.MultiVector[4]] = hs.embedded("title", fn=MultiFake())

    da = make_da(Both)
    docs = texts_of(8)
    da.extend([{"id": d["id"], "title": d["title"]} for d in docs])
    for d in docs:
        got = da[d["id"]]
        assert got.sp == sparse_reference(d["title"])
        np.testing.assert_array_equal(np.asarray(got.mv), multi_reference(d["title"]))
    for q in ("red cable", "lamp desk phone"):
        got = da.find(text=q, vector="auto", limit=4, exact=True)
        want = da.find(text=q, vector={"sp": sparse_reference(q), "mv": multi_reference(q)}, limit=4, exact=True)
        assert got.ids == want.ids and set(got.part_scores) == {"text", "sp", "mv"}
        np.testing.assert_allclose(got.scores, want.scores, rtol=1e-6)


def test_a_wrong_kind_of_function_is_refused():
    with pytest.raises(hs.SchemaError, match="makes sparse vectors, the field holds dense"):
        class Wrong(hs.Document):
            title: hs.Text = ""
            emb: hs.Vector[DIM] = hs.embedded("title", fn=SparseFake())


def test_optional_field_without_text_stays_none_and_frames(make_da):
    pd = pytest.importorskip("pandas", reason='needs the pandas extra: pip install "hybridsearch[pandas]"')
    fn = Fake(dimension=8, batch_size=2)

    class Maybe(hs.Document):
        title: hs.Text = ""
        emb: Optional[hs.Vector[8]] = hs.embedded("title", fn=fn)

    da = make_da(Maybe)
    frame = pd.DataFrame({"id": ["a", "b", "c"], "title": ["red lamp", "", "usb desk"]})
    da.extend_columns(frame)
    assert fn.calls == [["red lamp", "usb desk"]]  # "b" has no text: not embedded, kept None
    assert da["b"].emb is None
    np.testing.assert_array_equal(np.asarray(da["c"].emb), reference("usb desk", 8, fn.model))
    assert da.find(text="red lamp", vector="auto", limit=3, exact=True).ids[0] == "a"
