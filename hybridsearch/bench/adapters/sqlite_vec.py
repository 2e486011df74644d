"""sqlite-vec, the vector extension of SQLite: an in-memory vec0 table (brute force) with the
category as a metadata column. This Python's sqlite3 may not load extensions; pysqlite3 can."""
from __future__ import annotations

import numpy as np

KNN = "SELECT rowid FROM v WHERE embedding MATCH ? AND k = {k} ORDER BY distance"
KNN_FILTERED = "SELECT rowid FROM v WHERE embedding MATCH ? AND k = {k} AND category = ? ORDER BY distance"


class SqliteVec:
    """vec0 over the products' embeddings (cosine); search(q, category=None) -> ids (strings)."""

    name = "sqlite-vec"

    def __init__(self, docs: list, dim: int, k: int = 10) -> None:
        import pysqlite3
        import sqlite_vec
        self.db = pysqlite3.connect(":memory:")
        self.db.enable_load_extension(True)
        sqlite_vec.load(self.db)
        self.db.enable_load_extension(False)
        self.version = self.db.execute("select vec_version()").fetchone()[0]
        self.db.execute(f"CREATE VIRTUAL TABLE v USING vec0(embedding float[{dim}] distance_metric=cosine, "
                        "category text)")
        with self.db:
            self.db.executemany("INSERT INTO v(rowid, embedding, category) VALUES (?, ?, ?)",
                                [(int(d["id"]), np.asarray(d["embedding"], dtype=np.float32).tobytes(),
                                  d["category"]) for d in docs])
        self.knn, self.knn_filtered = KNN.format(k=k), KNN_FILTERED.format(k=k)

    def search(self, q: np.ndarray, category=None) -> list:
        """The exact top-k ids of q (among one category's products when given)."""
        q = np.asarray(q, dtype=np.float32).tobytes()
        rows = self.db.execute(self.knn, (q,)) if category is None else \
            self.db.execute(self.knn_filtered, (q, category))
        return [str(r[0]) for r in rows]

    def close(self) -> None:
        """Closes the connection."""
        self.db.close()
