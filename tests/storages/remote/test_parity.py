"""memory vs elasticsearch / opensearch on one corpus: overlap@10 of lexical, vector and hybrid
results, printed as the e-commerce benchmark's overlap table and held to stated floors.

Lexical parity needs the same analysis on both sides: the engines' `standard` analyzer
(Unicode words, lowercased, no stemming), so our fields use hs.Analyzer(stemmer=None).
What still differs and bounds the overlap: Lucene stores document lengths in one byte
(BM25 length norms are approximate), the engines' vector search is HNSW (ours on
memory is exact), and hybrid "sum" candidates come from different first stages.
"""
import uuid
from typing import Annotated

import numpy as np
import pytest

import hybridsearch as hs
from tests.engines import STORAGE_KIND, engine
from tests.storages.remote.proxy import official_client

PLAIN = hs.Analyzer(stemmer=None)


class Product(hs.Document):
    title: Annotated[hs.Text, PLAIN]
    description: Annotated[hs.Text, PLAIN] = ""
    category: hs.Keyword
    embedding: hs.Vector[16]


def corpus(n=3000, seed=5):
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(800)]
    p = 1.0 / np.arange(1, len(vocab) + 1) ** 1.1
    p /= p.sum()
    docs = []
    for i in range(n):
        title = " ".join(rng.choice(vocab, rng.integers(3, 9), p=p))
        desc = " ".join(rng.choice(vocab, rng.integers(10, 30), p=p))
        docs.append({"id": f"d{i}", "title": title, "description": desc, "category": f"c{i % 10}",
                     "embedding": rng.standard_normal(16)})
    queries = [" ".join(d["title"].split()[:4]) for d in rng.choice(docs, 40, replace=False)]
    return docs, queries, rng.standard_normal((40, 16)).astype(np.float32)


def overlap(a, b, k=10):
    if not a and not b:
        return 1.0
    return len(set(a[:k]) & set(b[:k])) / max(1, min(k, max(len(a), len(b))))


@pytest.mark.parametrize("storage", ["elasticsearch", "opensearch"])
def test_overlap_at_10_with_memory(storage, capsys):
    url, why = engine(STORAGE_KIND[storage])
    if url is None:
        pytest.skip(f"no {storage} node: {why}")
    docs, texts, vectors = corpus()
    mem = hs.DocumentArray(Product)
    mem.extend(docs)
    index = f"hs-test-{uuid.uuid4().hex}"
    remote = hs.DocumentArray(Product, storage=storage, hosts=url, index=index, refresh=True, ef=200)
    try:
        remote.extend(docs)
        rows = {}
        for label, flt in (("", None), (" + category filter", {"category": "c3"})):
            cases = {
                "lexical": [dict(text=t) for t in texts],
                "vector": [dict(vector=v) for v in vectors],
                "hybrid sum": [dict(text=t, vector=v) for t, v in zip(texts, vectors)],
                "hybrid rrf": [dict(text=t, vector=v, fusion="rrf") for t, v in zip(texts, vectors)],
                "hybrid sum exact": [dict(text=t, vector=v, exact=True) for t, v in zip(texts[:10], vectors)],
            }
            for name, calls in cases.items():
                rows[name + label] = float(np.mean([
                    overlap(mem.find(filter=flt, limit=10, **kw).ids, remote.find(filter=flt, limit=10, **kw).ids)
                    for kw in calls]))
        with capsys.disabled():
            print(f"\noverlap@10 memory vs {storage} ({len(docs)} docs, 40 queries):")
            for name, v in rows.items():
                print(f"  {name:36s} {v:.2f}")
        # floors: vector search is HNSW at ef=200 on 3,000 points; lexical differs only by Lucene's
        # one-byte length norms; hybrid inherits both (measured: 1.00 everywhere but rrf, 0.98)
        assert rows["vector"] >= 0.95 and rows["vector + category filter"] >= 0.95
        assert rows["lexical"] >= 0.95 and rows["lexical + category filter"] >= 0.95
        for name in ("hybrid sum", "hybrid rrf", "hybrid sum + category filter", "hybrid rrf + category filter",
                     "hybrid sum exact", "hybrid sum exact + category filter"):
            assert rows[name] >= 0.9, (name, rows[name])
        # the same BM25 (k1=1.2, b=0.75) on both sides: top scores agree up to Lucene's length norms
        for t in texts[:10]:
            a, b = mem.find(text=t, limit=1).scores, remote.find(text=t, limit=1).scores
            assert len(a) == len(b) and np.allclose(a, b, rtol=0.05), (t, a, b)
        # hybrid sum = BM25 + similarity on both sides (the engine's BM25 read from its named-query score)
        for t, v in zip(texts[:10], vectors[:10]):
            a, b = mem.find(text=t, vector=v, limit=5).scores, remote.find(text=t, vector=v, limit=5).scores
            assert len(a) == len(b) == 5 and np.allclose(a, b, rtol=0.05), (t, a, b)
    finally:
        remote.close()
        client = official_client(storage, url)
        client.indices.delete(index=index, ignore_unavailable=True)
        client.close()
