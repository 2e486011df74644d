"""Benchmark datasets, generated offline and cached: clustered SIFT-like vectors with exact ground
truth, an e-commerce product catalogue, the nave-kjv relevance collection, and loaders for files a
user brings (.fvecs / .ivecs / .npy, BEIR-style JSONL)."""
from __future__ import annotations

import gzip
import hashlib
import importlib.util
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from hybridsearch.engine.exact import exact_topk

REPO_DATA = Path(__file__).resolve().parent.parent.parent / "benchmarks" / "data"


def cache_dir(path: Optional[str] = None) -> Path:
    """Where generated data and ground truth are cached (default ~/.cache/hybridsearch)."""
    p = Path(path or os.environ.get("HS_CACHE", Path.home() / ".cache" / "hybridsearch"))
    p.mkdir(parents=True, exist_ok=True)
    return p


# ---------------------------------------------------------------- vectors
def sift_like(n: int, n_queries: int = 1000, dim: int = 128, seed: int = 0) -> tuple:
    """Clustered non-negative float32 vectors shaped like SIFT (L2): (X, Q)."""
    rng = np.random.default_rng(seed)
    centers = rng.gamma(2.0, 20.0, (max(16, n // 2000), dim)).astype(np.float32)
    X = centers[rng.integers(0, len(centers), n)] + rng.normal(0, 12.0, (n, dim)).astype(np.float32)
    Q = centers[rng.integers(0, len(centers), n_queries)] + rng.normal(0, 12.0, (n_queries, dim)).astype(np.float32)
    return np.maximum(X, 0).astype(np.float32), np.maximum(Q, 0).astype(np.float32)


def ground_truth(X: np.ndarray, Q: np.ndarray, k: int, metric: str, cache: Optional[Path] = None) -> tuple:
    """Exact top-k (ids, scores) of every query by our exact kernel, cached by content hash."""
    key = hashlib.sha1(X[:: max(1, len(X) // 1000)].tobytes() + Q.tobytes() +
                       f"{X.shape}{k}{metric}".encode()).hexdigest()[:16]
    path = (cache or cache_dir()) / f"gt-{key}.npz"
    if path.exists():
        z = np.load(path)
        return z["ids"], z["scores"]
    scores, ids = exact_topk(X, Q, k, metric)
    np.savez(path, ids=ids, scores=scores)
    return ids, scores


def read_fvecs(path: str) -> np.ndarray:
    """TEXMEX .fvecs (int32 dim, then dim float32, per vector) -> (n, dim) float32."""
    raw = np.fromfile(path, dtype=np.int32)
    if raw.size == 0:
        return np.zeros((0, 0), dtype=np.float32)
    dim = int(raw[0])
    if dim <= 0 or raw.size % (dim + 1):
        raise ValueError(f"{path} is not an .fvecs file (dimension {dim}, {raw.size} words)")
    return raw.reshape(-1, dim + 1)[:, 1:].view(np.float32).copy()


def read_ivecs(path: str) -> np.ndarray:
    """TEXMEX .ivecs -> (n, dim) int32 (e.g. ground-truth neighbour ids)."""
    raw = np.fromfile(path, dtype=np.int32)
    if raw.size == 0:
        return np.zeros((0, 0), dtype=np.int32)
    dim = int(raw[0])
    if dim <= 0 or raw.size % (dim + 1):
        raise ValueError(f"{path} is not an .ivecs file (dimension {dim}, {raw.size} words)")
    return raw.reshape(-1, dim + 1)[:, 1:].copy()


def read_vectors(path: str) -> np.ndarray:
    """.fvecs or .npy -> (n, d) float32."""
    if str(path).endswith(".npy"):
        return np.ascontiguousarray(np.load(path), dtype=np.float32)
    return read_fvecs(path)


def read_idx_images(path: str) -> np.ndarray:
    """An IDX3 image file (optionally .gz), as Fashion-MNIST ships -> (n, rows * cols) float32."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as fh:
        data = fh.read()
    if len(data) < 16 or int.from_bytes(data[:4], "big") != 0x803:
        raise ValueError(f"{path} is not an IDX3 image file")
    n, rows, cols = (int.from_bytes(data[i:i + 4], "big") for i in (4, 8, 12))
    if len(data) != 16 + n * rows * cols:
        raise ValueError(f"{path}: {len(data) - 16} pixel bytes, the header promises {n} x {rows} x {cols}")
    return np.frombuffer(data, dtype=np.uint8, offset=16).reshape(n, rows * cols).astype(np.float32)


def fashion_mnist(path: str = "/usr/share/datasets/fashion-mnist") -> Optional[tuple]:
    """Fashion-MNIST from the Debian package dataset-fashion-mnist: (train 60000 x 784, test 10000 x 784)
    float32, or None when it is not installed."""
    root = Path(path)
    train, test = root / "train-images-idx3-ubyte.gz", root / "t10k-images-idx3-ubyte.gz"
    if not (train.exists() and test.exists()):
        return None
    return read_idx_images(str(train)), read_idx_images(str(test))


# --------------------------------------------------------------- products
@dataclass
class Products:
    docs: list
    queries: list          # first 8 words of sampled titles (as the Amazon-products benchmark)
    query_vectors: np.ndarray
    embedder: str


_ADJ = ["red", "blue", "black", "white", "green", "silver", "wireless", "portable", "classic", "premium", "mini",
        "smart", "waterproof", "organic", "vintage", "ultra", "compact", "deluxe", "ergonomic", "heavy"]
_CATEGORIES = ["Electronics", "Books", "Home & Kitchen", "Toys", "Sports", "Clothing", "Beauty", "Garden",
               "Automotive", "Grocery", "Office", "Pet Supplies", "Tools", "Music", "Health", "Baby", "Shoes",
               "Jewelry", "Movies", "Video Games"]


def _vocab(rng, size: int) -> list:
    """`size` distinct pronounceable words: the base-16 digits of 16 + i, one syllable per digit,
    shuffled so word frequency (Zipf rank) does not follow word length."""
    syll = ["ka", "lo", "mi", "ne", "ro", "ta", "vi", "su", "pe", "do", "ga", "zu", "fe", "hi", "jo", "qu"]
    words = []
    for i in range(size):
        n, w = i + 16, []
        while n:
            n, d = divmod(n, 16)
            w.append(syll[d])
        words.append("".join(reversed(w)))
    order = rng.permutation(size)
    return [words[j] for j in order]


def _embed_projection(texts: list, dim: int, vocab_index: dict, seed: int = 11) -> np.ndarray:
    """Deterministic bag-of-words projection embeddings: each word a fixed random unit vector."""
    rng = np.random.default_rng(seed)
    table = rng.standard_normal((len(vocab_index) + 1, dim)).astype(np.float32)
    out = np.zeros((len(texts), dim), dtype=np.float32)
    for i, t in enumerate(texts):
        ids = [vocab_index.get(w, len(vocab_index)) for w in t.lower().split()]
        if ids:
            out[i] = table[ids].sum(axis=0)
    out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)
    return out


def _embed_wordllama(texts: list):
    """256-d static embeddings from the wordllama wheel when installed, else None (never downloads)."""
    try:
        import wordllama
        from wordllama import WordLlama
    except ImportError:
        return None
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        wl = WordLlama.load(cache_dir=Path(wordllama.__file__).parent, disable_download=True)
        return np.asarray(wl.embed(texts, norm=True), dtype=np.float32)
    except Exception:  # a wheel without its weights: fall back to the projection
        return None


def products(n: int, n_queries: int = 200, dim: int = 384, seed: int = 1) -> Products:
    """An e-commerce catalogue like the Amazon-products benchmark (title, description, category,
    price, average_rating, normalised embedding), Zipfian words; cached per (n, dim, seed)."""
    # the embedder is part of the key: installing wordllama later must not reuse projections
    embedder_kind = "wordllama" if importlib.util.find_spec("wordllama") else f"projection{dim}"
    path = cache_dir() / f"products-{n}-{n_queries}-{seed}-{embedder_kind}.npz"
    rng = np.random.default_rng(seed)
    words = _vocab(rng, 30000)
    p = 1.0 / np.arange(1, len(words) + 1) ** 1.07
    p /= p.sum()
    title_w = rng.choice(len(words), (n, 10), p=p)
    desc_w = rng.choice(len(words), (n, 40), p=p)
    adj = rng.choice(_ADJ, n)
    titles = [f"{adj[i]} " + " ".join(words[j] for j in title_w[i]) for i in range(n)]
    descs = [" ".join(words[j] for j in desc_w[i]) for i in range(n)]
    cats = rng.choice(len(_CATEGORIES), n, p=np.linspace(2, 1, len(_CATEGORIES)) / np.linspace(2, 1, len(_CATEGORIES)).sum())
    prices = rng.integers(1, 2000, n)
    ratings = np.round(rng.uniform(1, 5, n), 1)
    qi = rng.choice(n, n_queries, replace=False)
    queries = [" ".join(titles[i].split()[:8]) for i in qi]
    if path.exists():
        z = np.load(path)
        emb, qv, embedder = z["emb"], z["qv"], str(z["embedder"])
    else:
        emb = _embed_wordllama(titles)
        if emb is not None:
            qv, embedder = _embed_wordllama(queries), "wordllama-256"
        else:
            index = {w: i for i, w in enumerate(words + list(_ADJ))}
            emb = _embed_projection([t + " " + d[:60] for t, d in zip(titles, descs)], dim, index)
            qv, embedder = _embed_projection(queries, dim, index), f"projection-{dim}"
        np.savez(path, emb=emb, qv=qv, embedder=embedder)
    docs = [{"id": str(i), "title": titles[i], "description": descs[i], "category": _CATEGORIES[cats[i]],
             "price": int(prices[i]), "average_rating": float(ratings[i]), "embedding": emb[i]} for i in range(n)]
    return Products(docs, queries, qv, embedder)


# ---------------------------------------------------------------- nave-kjv
@dataclass
class Relevance:
    corpus: list      # {"id", "text"}
    queries: dict     # query id -> text
    qrels: dict       # query id -> {doc id: gain}


def read_beir(folder: str, max_queries: Optional[int] = None, seed: int = 0) -> Relevance:
    """A BEIR-style folder: corpus.jsonl(.gz) {_id, title?, text}, queries.jsonl(.gz) {_id, text},
    qrels.tsv(.gz) or qrels/test.tsv (query-id, corpus-id, score; a header line is skipped)."""
    root = Path(folder)

    def opener(name):
        for cand in (root / name, root / (name + ".gz")):
            if cand.exists():
                return gzip.open(cand, "rt", encoding="utf-8") if cand.suffix == ".gz" else open(cand, encoding="utf-8")
        raise FileNotFoundError(f"{root} has no {name}(.gz)")

    corpus = []
    with opener("corpus.jsonl") as f:
        for line in f:
            d = json.loads(line)
            corpus.append({"id": str(d["_id"]), "text": ((d.get("title") or "") + " " + d.get("text", "")).strip()})
    queries = {}
    with opener("queries.jsonl") as f:
        for line in f:
            d = json.loads(line)
            queries[str(d["_id"])] = d["text"]
    qrels: dict = {}
    qname = "qrels.tsv" if any((root / n).exists() for n in ("qrels.tsv", "qrels.tsv.gz")) else "qrels/test.tsv"
    with opener(qname) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 3 or not parts[2].lstrip("-").isdigit():
                continue
            qrels.setdefault(parts[0], {})[parts[1]] = int(parts[2])
    ids = sorted(q for q in qrels if q in queries)
    if max_queries is not None and len(ids) > max_queries:
        rng = np.random.default_rng(seed)
        ids = sorted(rng.choice(ids, max_queries, replace=False).tolist())
    return Relevance(corpus, {q: queries[q] for q in ids}, {q: qrels[q] for q in ids})


def nave_kjv(max_queries: int = 1000, folder: Optional[str] = None) -> Optional[Relevance]:
    """The nave-kjv collection (a copy ships in benchmarks/data/), or None when it is not there."""
    for cand in ([folder] if folder else []) + [REPO_DATA / "nave-kjv", "/work/shared/data/nave-kjv"]:
        if cand and Path(cand).exists():
            return read_beir(str(cand), max_queries)
    return None
