"""The databases users weigh hybridsearch against, as read-only comparison rows: Chroma (local),
Milvus Lite and LanceDB, each used the way its documentation shows (adapters/chroma.py,
milvus.py, lance.py). They are measured, never wrapped as storages; their libraries are imported
only when a row runs, and a row whose library is missing is skipped with a note naming the
`[anchors]` extra. Everything they write goes to a temporary folder on this machine."""
from __future__ import annotations

import os
import shutil
import tempfile

import numpy as np

from hybridsearch.bench.adapters.anchors import installed

# row name -> (module of this package, the Python modules it needs)
DATABASES = {"chroma": ("chroma", ("chromadb",)), "milvus-lite": ("milvus", ("pymilvus", "milvus_lite")),
             "lancedb": ("lance", ("lancedb", "pyarrow"))}
EXTRA = 'pip install -e ".[anchors]"'
QUERY_KINDS = ("lexical", "vector", "hybrid")


def quiet() -> None:
    """No telemetry from Chroma (its client reads these at import) and no Lance deprecation
    chatter on stderr: set before any of the three is imported."""
    os.environ["ANONYMIZED_TELEMETRY"] = "False"
    os.environ.setdefault("LANCEDB_LOG", "error")


def available(name: str) -> bool:
    """Whether the database row `name` can run here (its libraries import)."""
    return all(installed(m) for m in DATABASES[name][1])


def skip_note(name: str) -> str:
    """The note printed for a database row whose library is missing."""
    return f"{name}: skipped, {' / '.join(DATABASES[name][1])} not installed ({EXTRA})"


def split(names) -> tuple:
    """(names that can run, one skip note per database row that cannot); names that are not
    database rows pass through untouched."""
    usable, notes = [], []
    for n in names:
        if n in DATABASES and not available(n):
            notes.append(skip_note(n))
        else:
            usable.append(n)
    return usable, notes


def _module(name: str):
    import importlib
    quiet()
    return importlib.import_module(f"hybridsearch.bench.adapters.{DATABASES[name][0]}")


def vector_adapter(name: str):
    """The VectorAdapter of database row `name` (ann and filtered workloads)."""
    return _module(name).Vectors()


def product_adapter(name: str):
    """The ProductAdapter of database row `name` (e-commerce workload)."""
    return _module(name).Products()


def bound(query: dict | None) -> int | None:
    """t of the workloads' filter {"bucket": {"$lt": t}} (None without a filter)."""
    return None if query is None else int(query["bucket"]["$lt"])


class Workdir:
    """A temporary folder owned by one row, removed on close."""

    def __init__(self) -> None:
        self.path = tempfile.mkdtemp(prefix="hs-anchor-")

    def remove(self) -> None:
        """Deletes the folder and everything the database wrote there."""
        shutil.rmtree(self.path, ignore_errors=True)


class ProductAdapter:
    """A database answering the e-commerce queries: load(prod) writes the catalogue (integer id
    = row number, text = title + description, category, the embedding); searchers(prod, k)
    returns query name -> fn(i) -> (ids as strings, scores) for every query it has, and
    `unsupported` says, per query it does not have, why."""

    name = ""
    label = ""
    note = ""

    def __init__(self) -> None:
        self.unsupported: dict = {}
        self.work = Workdir()

    def load(self, prod) -> None:
        """Writes the catalogue and builds the indexes (timed by the caller)."""
        raise NotImplementedError

    def searchers(self, prod, k: int) -> dict:
        """query name ("lexical", "vector + filter", ...) -> fn(i) -> (ids, scores)."""
        raise NotImplementedError

    def close(self) -> None:
        """Closes the client and removes the files."""
        self.work.remove()


def product_columns(prod) -> dict:
    """The catalogue as plain columns: row number ids, one text, category, embeddings (n, d)."""
    emb = prod.embeddings if prod.embeddings is not None else np.stack([d["embedding"] for d in prod.docs])
    return {"id": np.arange(len(prod.docs), dtype=np.int64), "text": prod.texts(),
            "category": [d["category"] for d in prod.docs], "embedding": np.ascontiguousarray(emb, np.float32)}
