"""Text collections for the benchmarks: one generated product catalogue (Zipfian pseudo-words,
some inflected so that stemming matters, categories, prices, ratings, embeddings) used by every
workload that needs documents, and judged collections in the BEIR layout (nave-kjv ships in
benchmarks/data/)."""
from __future__ import annotations

import gzip
import importlib.util
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hybridsearch.bench.vectors import cache_dir, save_npz

REPO_DATA = Path(__file__).resolve().parent.parent.parent / "benchmarks" / "data"
ADJECTIVES = ["red", "blue", "black", "white", "green", "silver", "wireless", "portable", "classic", "premium",
              "mini", "smart", "waterproof", "organic", "vintage", "ultra", "compact", "deluxe", "ergonomic", "heavy"]
CATEGORIES = ["Electronics", "Books", "Home & Kitchen", "Toys", "Sports", "Clothing", "Beauty", "Garden",
              "Automotive", "Grocery", "Office", "Pet Supplies", "Tools", "Music", "Health", "Baby", "Shoes",
              "Jewelry", "Movies", "Video Games"]
ZIPF = 1.07


def vocabulary(rng, size: int, inflected: float = 0.15) -> list:
    """`size` distinct pronounceable pseudo-words: fresh stems of 2-4 syllables, and a share
    `inflected` of an earlier stem plus an English ending (-s, -ing, -ed, -er, -ly) that
    Snowball stemming folds back; shuffled so that Zipf rank does not follow how a word was made."""
    syllables = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"] + [c + v + "n" for c in "klmrst" for v in "aeiou"]
    endings = ("s", "ing", "ed", "er", "ly")
    words, seen, stems = [], set(), []
    while len(words) < size:
        if stems and rng.random() < inflected:
            w = stems[rng.integers(len(stems))] + endings[rng.integers(len(endings))]
        else:
            w = "".join(syllables[j] for j in rng.integers(0, len(syllables), rng.integers(2, 5)))
            if w not in seen:
                stems.append(w)
        if w not in seen:
            seen.add(w)
            words.append(w)
    return [words[i] for i in rng.permutation(size)]


def zipf_titles(n: int, rng, words_per_title: int = 8, vocab: int = 20_000) -> list:
    """n titles of `words_per_title` pseudo-words drawn Zipf(1.07) from a vocabulary of `vocab`:
    common words match a large share of the titles, as in product catalogues."""
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    words = ["".join(letters[rng.integers(0, 26, rng.integers(3, 9))]) for _ in range(vocab)]
    p = 1.0 / np.arange(1, vocab + 1) ** 1.07
    ids = rng.choice(vocab, size=(n, words_per_title), p=p / p.sum())
    return [" ".join(words[i] for i in row) for row in ids]


def _embed_projection(texts: list, dim: int, index: dict, seed: int = 11) -> np.ndarray:
    """Deterministic bag-of-words embeddings: each word a fixed random vector, summed, normalised."""
    table = np.random.default_rng(seed).standard_normal((len(index) + 1, dim)).astype(np.float32)
    out = np.zeros((len(texts), dim), dtype=np.float32)
    for i, t in enumerate(texts):
        ids = [index.get(w, len(index)) for w in t.lower().split()]
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
    except Exception:  # noqa: BLE001 -- a wheel without its weights: the projection instead
        return None


@dataclass
class Products:
    """A generated catalogue: documents as dicts, query strings with their query vectors."""
    docs: list                 # id, title, description, category, price, average_rating, embedding
    queries: list              # consecutive words of sampled titles
    query_vectors: np.ndarray  # (len(queries), dim) normalised
    embedder: str              # "wordllama-256" or "projection-<dim>"
    filter: dict               # a category filter matching ~6% of the products
    embeddings: np.ndarray | None = None  # (len(docs), dim): the block the documents' vectors view

    def texts(self) -> list:
        """title + " " + description per document (the single field of one-field libraries)."""
        return [d["title"] + " " + d["description"] for d in self.docs]

    def columns(self, docs: slice = slice(None)) -> dict:
        """The documents (a slice of them) as columns for DocumentArray.extend_columns: lists of
        ids and strings, numpy arrays of numbers, the embeddings as one (n, dim) block."""
        part = self.docs[docs]
        emb = self.embeddings[docs] if self.embeddings is not None else np.stack([d["embedding"] for d in part])
        cols = {f: [d[f] for d in part] for f in ("id", "title", "description", "category")}
        cols["price"] = np.fromiter((d["price"] for d in part), dtype=np.int64, count=len(part))
        cols["average_rating"] = np.fromiter((d["average_rating"] for d in part), dtype=np.float64, count=len(part))
        cols["embedding"] = emb
        return cols


def products(n: int, n_queries: int = 200, dim: int = 384, seed: int = 1, vocab: int = 30000,
             title_words: int = 11, query_words: tuple = (8, 8), embedder: str = "auto") -> Products:
    """An e-commerce catalogue shaped like the Amazon-products benchmark: a title (an English
    adjective and title_words - 1 Zipfian pseudo-words), a 40-word description, one of 20
    categories (weighted 2:1 from the first to the last), price, average_rating and a
    normalised embedding of the title (wordllama's 256-d static embeddings with embedder="auto"
    when installed, else a `dim`-d bag-of-words projection). Queries are query_words[0] to
    query_words[1] consecutive words of sampled titles. Embeddings are cached per arguments."""
    rng = np.random.default_rng(seed)
    words = vocabulary(rng, vocab)
    p = 1.0 / np.arange(1, vocab + 1) ** ZIPF
    p /= p.sum()
    title_w = rng.choice(vocab, (n, title_words - 1), p=p)
    desc_w = rng.choice(vocab, (n, 40), p=p)
    adj = rng.choice(ADJECTIVES, n)
    titles = [f"{adj[i]} " + " ".join(words[j] for j in title_w[i]) for i in range(n)]
    descs = [" ".join(words[j] for j in desc_w[i]) for i in range(n)]
    weights = np.linspace(2, 1, len(CATEGORIES))
    cats = rng.choice(len(CATEGORIES), n, p=weights / weights.sum())
    prices = rng.integers(1, 2000, n)
    ratings = np.round(rng.uniform(1, 5, n), 1)
    queries = []
    for i in rng.choice(n, n_queries, replace=n_queries > n):
        t = titles[i].split()
        length = min(len(t), int(rng.integers(query_words[0], query_words[1] + 1)))
        start = int(rng.integers(0, len(t) - length + 1))
        queries.append(" ".join(t[start:start + length]))
    kind = "wordllama" if embedder == "auto" and importlib.util.find_spec("wordllama") else f"projection{dim}"
    path = cache_dir() / f"products-{n}-{n_queries}-{seed}-{vocab}-{title_words}-{query_words[0]}-{query_words[1]}-{kind}.npz"
    if path.exists():
        z = np.load(path)
        emb, qv, used = z["emb"], z["qv"], str(z["embedder"])
    else:
        emb = _embed_wordllama(titles) if kind == "wordllama" else None
        if emb is not None:
            qv, used = _embed_wordllama(queries), "wordllama-256"
        else:
            index = {w: i for i, w in enumerate(words + ADJECTIVES)}
            emb = _embed_projection([t + " " + d[:60] for t, d in zip(titles, descs)], dim, index)
            qv, used = _embed_projection(queries, dim, index), f"projection-{dim}"
        save_npz(path, emb=emb, qv=qv, embedder=used)
    docs = [{"id": str(i), "title": titles[i], "description": descs[i], "category": CATEGORIES[cats[i]],
             "price": int(prices[i]), "average_rating": float(ratings[i]), "embedding": emb[i]} for i in range(n)]
    return Products(docs, queries, qv, used, {"category": CATEGORIES[3]}, emb)


# ------------------------------------------------------------------ judged collections
@dataclass
class Relevance:
    """A judged collection: documents, queries and graded judgments."""
    corpus: list      # {"id", "text"}
    queries: dict     # query id -> text
    qrels: dict       # query id -> {doc id: gain}


SHOP_WORDS = np.array("red blue green small large cotton wool leather shoe shirt coat bag hat scarf boot sock "
                      "light dark soft warm classic modern slim loose".split())


def shop_model(dim: int = 128):
    """The memory and reopen benchmarks' document: an 8-word title, a keyword, an int, a float
    and a `dim`-d vector."""
    import hybridsearch as hs

    class Product(hs.Document):
        title: hs.Text
        brand: hs.Keyword
        stock: int
        price: float
        v: hs.Vector[dim]
    return Product


def shop_columns(lo: int, hi: int, rng, dim: int = 128) -> dict:
    """Columns of shop_model documents lo..hi-1 (ids p0000000...), for extend_columns."""
    n = hi - lo
    return {"id": [f"p{i:07d}" for i in range(lo, hi)],
            "title": [" ".join(SHOP_WORDS[rng.integers(0, len(SHOP_WORDS), 8)]) for _ in range(n)],
            "brand": [f"brand{i % 500}" for i in range(lo, hi)],
            "stock": rng.integers(0, 1000, n), "price": rng.random(n) * 100,
            "v": rng.standard_normal((n, dim)).astype(np.float32)}


def read_beir(folder: str, max_queries: int | None = None, seed: int = 0) -> Relevance:
    """A BEIR-style folder: corpus.jsonl(.gz) {_id, title?, text}, queries.jsonl(.gz) {_id, text},
    qrels.tsv(.gz) or qrels/test.tsv (query-id, corpus-id, score; a header line is skipped);
    at most `max_queries` judged queries, sampled with `seed`."""
    root = Path(folder)

    def lines(name):
        for cand in (root / name, root / (name + ".gz")):
            if cand.exists():
                opener = gzip.open if cand.suffix == ".gz" else open
                with opener(cand, "rt", encoding="utf-8") as f:
                    yield from f
                return
        raise FileNotFoundError(f"{root} has no {name}(.gz)")

    corpus = []
    for line in lines("corpus.jsonl"):
        d = json.loads(line)
        corpus.append({"id": str(d["_id"]), "text": ((d.get("title") or "") + " " + d.get("text", "")).strip()})
    queries = {str(d["_id"]): d["text"] for d in map(json.loads, lines("queries.jsonl"))}
    qrels: dict = {}
    qname = "qrels.tsv" if any((root / n).exists() for n in ("qrels.tsv", "qrels.tsv.gz")) else "qrels/test.tsv"
    for line in lines(qname):
        parts = line.rstrip("\n").split("\t")
        if len(parts) >= 3 and parts[2].lstrip("-").isdigit():
            qrels.setdefault(parts[0], {})[parts[1]] = int(parts[2])
    ids = sorted(q for q in qrels if q in queries)
    if max_queries is not None and len(ids) > max_queries:
        ids = sorted(np.random.default_rng(seed).choice(ids, max_queries, replace=False).tolist())
    return Relevance(corpus, {q: queries[q] for q in ids}, {q: qrels[q] for q in ids})


def nave_kjv(max_queries: int = 1000, folder: str | None = None) -> Relevance | None:
    """The nave-kjv collection (`folder`, else the copy in benchmarks/data/), or None when absent."""
    for cand in ([folder] if folder else []) + [REPO_DATA / "nave-kjv"]:
        if Path(cand).exists():
            return read_beir(str(cand), max_queries)
    return None
