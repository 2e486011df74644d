"""Shared fixtures: the storages every shared test runs on.

A later storage joins the whole suite by adding its name to STORAGES (and, if
it needs options such as a path or a server, a line in `make_da`).
"""
import numpy as np
import pytest

import hybridsearch as hs

STORAGES = ["memory", "hnswlib", "hnsw", "hnsw-path", "sqlite"]
# storages whose vector search is exact; approximate ones get recall-based checks
EXACT_STORAGES = {"memory", "sqlite"}


@pytest.fixture(params=STORAGES)
def storage(request):
    return request.param


@pytest.fixture
def make_da(storage, tmp_path):
    """Factory: make_da(Schema, **options) -> a fresh DocumentArray on the current storage."""
    opened = []

    def make(schema, **options):
        if storage == "hnsw-path":  # the hnsw storage with its files: every write is logged
            options.setdefault("path", tmp_path / f"collection{len(opened)}")
            da = hs.DocumentArray(schema, storage="hnsw", **options)
        elif storage == "sqlite":
            options.setdefault("path", tmp_path / f"collection{len(opened)}.db")
            da = hs.DocumentArray(schema, storage="sqlite", **options)
        else:
            da = hs.DocumentArray(schema, storage=storage, **options)
        opened.append(da)
        return da

    yield make
    for da in opened:
        da.close()


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
