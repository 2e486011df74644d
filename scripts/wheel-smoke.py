"""Smoke test of an installed hybridsearch wheel, run outside the source tree (scripts/wheel.sh,
cibuildwheel's test-command): the package comes from site-packages, ships no sources, runs its
kernels at every SIMD level this CPU has, serves the embedded storages, and names the extra for
every optional package that is missing. Exits non-zero on the first failure."""
import importlib.util
import os
import pathlib
import subprocess
import sys
import tempfile

import numpy as np

import hybridsearch as hs
from hybridsearch.engine.exact import ExactIndex, force_simd, simd_level, simd_levels


def check(cond: bool, what: str) -> None:
    """Stops the smoke test with `what` when `cond` is false."""
    if not cond:
        sys.exit(f"wheel smoke test FAILED: {what}")


def installed_files() -> None:
    """The package is the installed one, with py.typed and no C or Cython sources."""
    root = pathlib.Path(hs.__file__).parent
    check("site-packages" in str(root), f"hybridsearch imported from {root}, not from site-packages")
    files = [p.name for p in root.rglob("*") if p.is_file()]
    check("py.typed" in files, "py.typed is missing")
    sources = [f for f in files if f.endswith((".c", ".pyx", ".pxd", ".pxi"))]
    check(not sources, f"the wheel ships sources: {sources}")


def kernels_at_every_level() -> None:
    """Exact top-10 at each SIMD level equals numpy's."""
    rng = np.random.default_rng(7)
    X = rng.standard_normal((5000, 37), dtype=np.float32)
    q = rng.standard_normal(37, dtype=np.float32)
    want = np.argsort(-(X.astype(np.float64) @ q), kind="stable")[:10]
    best = simd_level()
    for level in simd_levels():
        check(force_simd(level) == level, f"could not switch to {level}")
        got = ExactIndex(X, "ip").search(q[None, :], 10)[1][0]
        check(list(got) == list(want), f"exact search at {level} differs from numpy")
    force_simd(best)
    print(f"kernels: {', '.join(simd_levels())} (loaded at {best})")


class Product(hs.Document):
    """The smoke test's schema."""
    title: hs.Text
    category: hs.Keyword
    price: int = 0
    embedding: hs.Vector[4]


DOCS = [{"id": "p1", "title": "blue phone", "category": "Phones", "price": 59, "embedding": [1, 0, 0, 0]},
        {"id": "p2", "title": "a paperback", "category": "Books", "price": 12, "embedding": [0, 1, 0, 0]},
        {"id": "p3", "title": "blue phone case", "category": "Phones", "price": 9, "embedding": [0.9, 0.2, 0, 0]}]


def storages(folder: str) -> None:
    """CRUD, filters, vector, text and hybrid on memory, hnsw (with files, reopened) and sqlite."""
    for storage, opts in (("memory", {}), ("hnsw", {"path": os.path.join(folder, "h")}),
                          ("sqlite", {"path": os.path.join(folder, "s.db")})):
        da = hs.DocumentArray(Product, storage=storage, **opts)
        da.extend(DOCS)
        da.update("p1", price=49)
        check(da.find(vector=[1, 0, 0, 0], filter={"category": "Phones"}, limit=2).ids == ["p1", "p3"], storage)
        check(da.find(text="phone case").ids == ["p3", "p1"], f"{storage}: text")
        check(da.find(text="blue", vector=[1, 0, 0, 0], fusion="rrf", limit=2).ids[0] in ("p1", "p3"), storage)
        check(da.count(filter={"price": {"$lt": 50}}) == 3, f"{storage}: count")
        da.close()
        if opts:
            again = hs.DocumentArray(Product, storage=storage, **opts)
            check(len(again) == 3 and again["p1"].price == 49, f"{storage}: reopen")
            again.close()
    print("storages: memory, hnsw, sqlite")


def missing_extras() -> None:
    """Each optional feature whose package is absent raises UnsupportedError with its pip line."""
    da = hs.DocumentArray(Product)
    da.extend(DOCS)
    cases = [("pandas", "pandas", lambda: da.to_pandas()), ("pyarrow", "arrow", lambda: da.to_arrow()),
             ("rich", "progress", lambda: da.extend(DOCS, progress=True)),
             ("hnswlib", "hnswlib", lambda: hs.DocumentArray(Product, storage="hnswlib")),
             ("elasticsearch", "elasticsearch", lambda: hs.DocumentArray(Product, storage="elasticsearch"))]
    seen = []
    for module, extra, call in cases:
        if importlib.util.find_spec(module) is not None:
            continue
        try:
            call()
        except hs.UnsupportedError as e:
            check(f'hybridsearch[{extra}]' in str(e), f"{module} missing: {e} does not name [{extra}]")
            seen.append(extra)
        else:
            check(False, f"{module} is missing but nothing was raised")
    if importlib.util.find_spec("rich") is None:
        p = subprocess.run([sys.executable, "-m", "hybridsearch", "bench", "--quick"], capture_output=True, text=True)
        check(p.returncode == 2 and "hybridsearch[bench]" in p.stderr, f"hybridsearch bench: {p.stderr[-300:]}")
        seen.append("bench")
    print(f"missing extras named: {', '.join(seen) or 'none missing'}")


def main() -> int:
    """Runs every check; prints one line per part."""
    installed_files()
    kernels_at_every_level()
    with tempfile.TemporaryDirectory() as folder:
        storages(folder)
    missing_extras()
    print(f"wheel smoke test passed: hybridsearch from {pathlib.Path(hs.__file__).parent}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
