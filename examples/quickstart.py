"""Quickstart: a small product catalogue with CRUD, filters and vector search.

Run:  python examples/quickstart.py
Embeddings here are a deterministic hash of the title's words (no model
download), so "similar titles -> similar vectors" holds well enough to show
vector search working.
"""
import hashlib

import numpy as np

import hybridsearch as hs

DIM = 64


class Product(hs.Document):
    title: hs.Text
    description: hs.Text = ""
    category: hs.Keyword
    price: int = 0
    average_rating: float = 0.0
    in_stock: bool = True
    embedding: hs.Vector[DIM]


def embed(text: str) -> np.ndarray:
    """Hashed words and character trigrams -> unit vector (a stand-in for a real model)."""
    v = np.zeros(DIM, dtype=np.float32)
    for word in text.lower().split():
        padded = f" {word} "
        for token in [word] + [padded[i:i + 3] for i in range(len(padded) - 2)]:
            h = int(hashlib.md5(token.encode()).hexdigest(), 16)
            v[h % DIM] += 1.0 if (h >> 8) & 1 else -1.0
    return v / (np.linalg.norm(v) or 1.0)


CATALOGUE = [
    ("nokia-3310", "Nokia 3310 blue mobile phone", "Phones", 59, 4.1),
    ("pixel-8", "Google Pixel 8 phone 128GB", "Phones", 699, 4.5),
    ("iphone-15", "Apple iPhone 15 phone blue", "Phones", 899, 4.6),
    ("kindle", "Kindle Paperwhite e-reader", "Books", 139, 4.7),
    ("dune", "Dune by Frank Herbert paperback", "Books", 12, 4.8),
    ("lego-city", "LEGO City police station", "Toys", 99, 4.4),
    ("rubik", "Rubik's cube classic", "Toys", 10, 4.2),
    ("earbuds", "Wireless earbuds for phone blue", "Audio", 49, 3.9),
]


def main() -> None:
    da = hs.DocumentArray(Product, storage="memory", metric="cosine")

    # Create: one validated, atomic batch
    da.extend(
        Product(id=i, title=t, category=c, price=p, average_rating=r, embedding=embed(t))
        for i, t, c, p, r in CATALOGUE
    )
    print(f"{len(da)} products in {da!r}")

    # Read
    print("read:", da["kindle"].title, "| 'dune' in da:", "dune" in da)

    # Update only the named fields (vectors and other columns untouched)
    da.update("nokia-3310", price=49, in_stock=False)
    print("updated price:", da["nokia-3310"].price)

    # Find by condition (insertion order, score 0)
    cheap = da.find(filter={"price": {"$lt": 100}, "in_stock": True}, limit=None)
    print("in stock under 100:", cheap.ids)
    either = da.find(filter={"$or": [{"category": "Books"}, {"average_rating": {"$gte": 4.6}}]})
    print("books or rating >= 4.6:", either.ids)

    # Find by vector (exact cosine on the memory storage)
    res = da.find(vector=embed("blue phone"), limit=3)
    print("vector 'blue phone':")
    for hit in res:
        print(f"   {hit.score:.3f}  {hit.id:12s} {hit.doc.title}")

    # Filtered vector search: a pre-filter, so every hit matches
    res = da.find(vector=embed("blue phone"), filter={"category": "Phones", "price": {"$lte": 700}}, limit=3)
    print("vector 'blue phone', Phones <= 700:", [(i, round(float(s), 3)) for i, s in zip(res.ids, res.scores)])

    # Lexical (BM25, best field wins; "phones" and "phone" share a stem) and hybrid
    res = da.find(text="nokia blue phones", limit=3)
    print("text 'nokia blue phones':", [(i, round(float(s), 2)) for i, s in zip(res.ids, res.scores)])
    res = da.find(text="nokia blue phones", vector=embed("blue phone"), fusion="rrf", limit=3)
    print("hybrid (rrf):", res.ids)

    # Many queries at once, spread over all cores
    batch = da.find_batched(np.stack([embed("phone"), embed("toy cube"), embed("book")]), limit=2)
    print("batched top-2:", [r.ids for r in batch])

    # Delete
    del da["rubik"]
    removed = da.delete(["lego-city", "not-there"])  # absent ids are skipped
    print(f"deleted rubik and {removed} more; {len(da)} left")

    # Errors are typed and say what is wrong; nothing is written
    for bad in (lambda: da.append({"title": "x", "category": "Toys", "embedding": [1.0, 2.0]}),
                lambda: da.find(filter={"colour": "red"}),
                lambda: da.find(text="blue phone", fusion="max")):
        try:
            bad()
        except hs.HybridSearchError as e:
            print(f"{type(e).__name__}: {e}")
    print(len(da), "products left; storages in this install:", hs.storages())


if __name__ == "__main__":
    main()
