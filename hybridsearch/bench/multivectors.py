"""Token-block (multi-vector, ColBERT-like) data for the MaxSim benchmark and tests: clustered
unit token vectors, documents about a few topics each, queries about some of a document's
topics; plus a float64 numpy reference of exhaustive MaxSim."""
from __future__ import annotations

import numpy as np


def colbert_like(n_docs: int, n_queries: int, dim: int = 128, tokens: tuple = (20, 60),
                 query_tokens: int = 32, topics: int = 1000, per_doc: int = 4,
                 noise: float = 0.7, seed: int = 0) -> tuple:
    """(doc blocks, query blocks): lists of float32 (n_i, dim) arrays of unit rows.

    Every token is a topic centre plus Gaussian noise (norm about `noise` x the centre's),
    normalised. A document draws `per_doc` topics and 20..60 tokens among them; a query
    takes 2 or 3 topics of a random document and `query_tokens` tokens among them, so its
    best documents share topics with it, as a real query's do."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((topics, dim)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    sigma = np.float32(noise / np.sqrt(dim))

    def block(topic_ids, n):
        t = centres[rng.choice(topic_ids, size=n)]
        x = t + rng.standard_normal((n, dim), dtype=np.float32) * sigma
        return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)

    doc_topics = [rng.choice(topics, size=per_doc, replace=False) for _ in range(n_docs)]
    docs = [block(t, int(rng.integers(tokens[0], tokens[1] + 1))) for t in doc_topics]
    queries = []
    for _ in range(n_queries):
        src = doc_topics[int(rng.integers(n_docs))]
        queries.append(block(rng.choice(src, size=int(rng.integers(2, 4)), replace=False), query_tokens))
    return docs, queries


def maxsim_numpy(docs: list, Q: np.ndarray, metric: str = "ip", dtype=np.float64) -> np.ndarray:
    """Exhaustive MaxSim of Q against every block, the plain numpy way: one matrix product
    over all token rows, then a max per document (np.maximum.reduceat) and a sum."""
    rows = np.concatenate(docs).astype(dtype)
    q = np.asarray(Q, dtype=dtype)
    if metric == "cosine":
        rows = rows / np.linalg.norm(rows, axis=1, keepdims=True)
        q = q / np.linalg.norm(q, axis=1, keepdims=True)
    if metric == "l2":
        S = -np.sqrt(np.maximum((q * q).sum(1)[None, :] + (rows * rows).sum(1)[:, None] - 2 * rows @ q.T, 0))
    else:
        S = rows @ q.T  # (tokens, m)
    starts = np.concatenate(([0], np.cumsum([len(b) for b in docs])[:-1]))
    return np.maximum.reduceat(S, starts, axis=0).sum(axis=1)
