"""The import rules of docs/architecture.md, read from the source (ast), so a move that breaks
the layering fails here instead of in a review."""
import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "hybridsearch"
MAX_LINES = 800
FAMILIES = ("local", "wrapped", "remote")


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        yield ".".join(parts), path, path.name == "__init__.py"


def _imports(name: str, path: Path, is_package: bool):
    """(imported module, imported names) of every import in the file, relative ones resolved."""
    tree = ast.parse(path.read_text(), str(path))
    here = name.split(".") if is_package else name.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, ()
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(here[: len(here) - node.level + 1] + ([base] if base else []))
            yield base, tuple(a.name for a in node.names)


MODULES = list(_modules())
IMPORTS = {name: list(_imports(name, path, pkg)) for name, path, pkg in MODULES}


def _ours(module: str) -> bool:
    return module == "hybridsearch" or module.startswith("hybridsearch.")


def _area(module: str) -> str:
    """The layer a module belongs to: query, engine, storages.<family>, bench, _native or face."""
    parts = module.split(".")
    if len(parts) < 2:
        return "face"
    if parts[1] == "storages" and len(parts) > 2 and parts[2] in FAMILIES:
        return f"storages.{parts[2]}"
    return parts[1] if parts[1] in ("query", "engine", "storages", "bench", "_native") else "face"


def test_only_the_engine_imports_the_native_core():
    offenders = [(m, t) for m, imps in IMPORTS.items() for t, names in imps
                 if (t.startswith("hybridsearch._native") or (t == "hybridsearch" and "_native" in names))
                 and _area(m) not in ("engine", "_native")]
    assert not offenders, offenders


def test_errors_is_a_leaf_and_query_imports_no_engine_or_storage():
    assert not [t for t, _ in IMPORTS["hybridsearch.errors"] if _ours(t)]
    for m, imps in IMPORTS.items():
        if _area(m) == "query" or m in ("hybridsearch.document", "hybridsearch.results", "hybridsearch.batch"):
            bad = [t for t, _ in imps if _ours(t) and _area(t) not in ("query", "face")
                   or t in ("hybridsearch.array", "hybridsearch")]
            assert not bad, (m, bad)


def test_the_engine_imports_no_storage_and_storages_no_face_above_them():
    for m, imps in IMPORTS.items():
        targets = [t for t, _ in imps if _ours(t)]
        if _area(m) == "engine":
            assert not [t for t in targets if _area(t).startswith("storages") or _area(t) == "bench"], m
        if _area(m).startswith("storages") or _area(m) == "engine":
            assert not [t for t in targets if t in ("hybridsearch", "hybridsearch.array", "hybridsearch.results")], m


def test_storage_families_do_not_import_each_other():
    for m, imps in IMPORTS.items():
        mine = _area(m)
        if mine.startswith("storages."):
            other = [t for t, _ in imps if _area(t).startswith("storages.") and _area(t) != mine]
            assert not other, (m, other)


def test_no_private_name_is_imported_from_another_package():
    def package(module):
        return module.rsplit(".", 1)[0]

    offenders = []
    for m, imps in IMPORTS.items():
        for t, names in imps:
            if not _ours(t):
                continue
            private = [n for n in names if n.startswith("_") and not n.startswith("__")]
            if t.split(".")[-1].startswith("_") and t.split(".")[-1] != "__init__":
                private.append(t)
            if private and package(t) != package(m) and not t.startswith(package(m) + "."):
                offenders.append((m, t, private))
    # the compiled core is the engine's private half: the engine alone imports it
    offenders = [o for o in offenders if not (_area(o[0]) == "engine" and o[1].startswith("hybridsearch._native"))]
    assert not offenders, offenders


@pytest.mark.parametrize("name,path", [(n, p) for n, p, _ in MODULES], ids=[n for n, _, _ in MODULES])
def test_no_module_is_over_800_lines(name, path):
    assert len(path.read_text().splitlines()) <= MAX_LINES, name


# ---------------------------------------------------- storages retrieve, the executor fuses
PRIMITIVES = ("reading", "vector_top", "text_top", "text_matches", "scores_of", "hits_of")


def _defines(name: str, function: str) -> bool:
    path = dict((n, p) for n, p, _ in MODULES)[name]
    return any(isinstance(node, ast.FunctionDef) and node.name == function
               for node in ast.walk(ast.parse(path.read_text())))


def test_only_the_executor_fuses():
    """query/fusion.py's functions are the executor's alone: it fuses the retrieval lists, and the
    fusion rerankers it calls (query/rerank.py: RRFReranker, LinearReranker, issue 31) are those same
    fusions over the top hits; no storage and no other module fuses."""
    importers = {m for m, imps in IMPORTS.items() for t, names in imps
                 if t == "hybridsearch.query.fusion" or (t == "hybridsearch.query" and "fusion" in names)}
    assert importers == {"hybridsearch.query.executor", "hybridsearch.query.rerank"}, importers
    executor_imports = {t for t, _ in IMPORTS["hybridsearch.query.executor"]}
    assert "hybridsearch.query.rerank" in executor_imports  # reranking is reached through the executor


def test_storages_on_the_executor_keep_no_one_call_hybrid_search():
    for name, _, _ in MODULES:
        if _area(name).startswith("storages"):
            assert not _defines(name, "search_text"), name


def test_the_embedded_storages_implement_the_retrieval_primitives():
    # internal: the storage classes themselves, which the public API never names
    from hybridsearch.storages.base import Storage
    from hybridsearch.storages.registry import storage_class
    for name in ("memory", "hnsw", "sqlite", "hnswlib"):
        cls = storage_class(name)
        for primitive in PRIMITIVES:
            assert getattr(cls, primitive) is not getattr(Storage, primitive), (name, primitive)


def test_the_remote_storages_implement_the_retrieval_primitives():
    # internal: the storage classes themselves; ids are their keys, so Storage.hits_of serves them
    from hybridsearch.storages.base import Storage
    from hybridsearch.storages.registry import storage_class
    for name in ("elasticsearch", "opensearch", "qdrant", "weaviate", "vespa"):
        cls = storage_class(name)
        for primitive in PRIMITIVES:
            if primitive != "hits_of":
                assert getattr(cls, primitive) is not getattr(Storage, primitive), (name, primitive)
