"""The harness as a whole: machine facts, tables and script output, the report writer, a tiny
end-to-end `hybridsearch bench` run and the storage selection; and that no benchmark code
touches a private name."""
import json
import re
from pathlib import Path

import pytest

from hybridsearch.bench import machine, tables
from hybridsearch.bench import metrics as M
from hybridsearch.bench import report as R
from hybridsearch.bench.workloads.ecommerce import add_overlaps

ROOT = Path(__file__).resolve().parents[2]


def test_machine_facts():
    from hybridsearch.engine.exact import simd_level
    f = machine.machine_facts()
    assert f["cpu"] and f["cores"] >= 1 and 1 <= f["cores_available"] <= f["cores"]
    assert f["simd"] == simd_level() and f["python"].count(".") == 2
    assert re.match(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}", f["date"])
    assert f["versions"]["hybridsearch"] and f["versions"]["numpy"]
    line = machine.describe(f)
    assert f["cpu"] in line and f"SIMD {f['simd']}" in line and "numpy" in line
    assert machine.versions(["surely-not-installed-xyz"]) == {}


def test_tables_and_output(tmp_path, capsys):
    assert tables.fmt(1234.5) == "1,234" and tables.fmt(0.12345, 3) == "0.123" and tables.fmt(float("nan")) == "–"
    assert tables.ratio(3, 2) == "1.50x" and tables.ratio(1, 0) == "n/a" and tables.ratio(None, 1) == "n/a"
    assert tables.verdict(2.0, lambda v: v >= 1) == "PASS" and tables.verdict(None, bool) == "n/a"
    assert tables.markdown_table(["a", "b"], [[1, 2]]) == ["| a | b |", "| --- | --- |", "| 1 | 2 |"]
    assert tables.text_table(["name", "x"], [["ab", "1"], ["c", "100"]]) == ["  name    x", "  ab      1", "  c     100"]
    out = tables.Output(None, "nothing")
    out.say("hello")
    out.save({"a": 1})  # no folder named: nothing written
    assert capsys.readouterr().out == "hello\n" and not list(tmp_path.iterdir())
    out = tables.Output(str(tmp_path / "o"), "run")
    out.table(["k", "v"], [["x", 1]])
    import numpy as np
    out.save({"v": np.float32(0.5), "a": np.arange(2)})
    assert (tmp_path / "o" / "run.txt").read_text() == "  k  v\n  x  1\n"
    assert json.loads((tmp_path / "o" / "run.json").read_text()) == {"v": 0.5, "a": [0, 1]}


def test_every_public_name_of_the_harness_says_what_it_is():
    """A docstring on every module, class, function and method of hybridsearch.bench not named _x."""
    import ast
    missing = []
    for f in sorted((ROOT / "hybridsearch" / "bench").rglob("*.py")):
        tree = ast.parse(f.read_text())
        missing += [] if ast.get_docstring(tree) else [str(f)]
        todo = [(tree, "")]
        while todo:
            node, prefix = todo.pop()
            for n in ast.iter_child_nodes(node):
                if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and not n.name.startswith("_"):
                    missing += [] if ast.get_docstring(n) else [f"{f.relative_to(ROOT)}: {prefix}{n.name}"]
                    if isinstance(n, ast.ClassDef):
                        todo.append((n, n.name + "."))
    assert not missing, missing
    assert max(len(f.read_text().splitlines()) for f in (ROOT / "hybridsearch" / "bench").rglob("*.py")) <= 800


def test_no_benchmark_code_touches_a_private_name():
    """The harness and the scripts use the public API, hybridsearch.engine's public names and
    da.stats(): no `._x` attribute, no `_native`, no private import from another package."""
    files = sorted((ROOT / "hybridsearch" / "bench").rglob("*.py")) + sorted((ROOT / "benchmarks").rglob("*.py"))
    assert len(files) > 20
    bad = []
    for f in files:
        for n, line in enumerate(f.read_text().splitlines(), 1):
            code = re.sub(r"\b(self|cls)\._", "self.", line.split("#", 1)[0])  # an object's own helpers
            if re.search(r"(?<![\w.])[A-Za-z]\w*\._[a-z]\w*", code.replace("__", "")) or "_native" in code \
                    or re.search(r"import _\w|from \S+ import .*\b_[a-z]", code):
                bad.append(f"{f.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not bad, "\n".join(bad)


def test_report_writes_json_markdown_and_plots(tmp_path):
    results = {"mode": "quick", "machine": machine.machine_facts(), "skipped": ["x: not installed"],
               "ann_data": "tiny", "ann": [{"storage": "hnsw", "m": 16, "ef_construct": 100, "build_s": 0.1,
                                           "points": [{"ef": 10, "recall": 0.9, "qps": 1000.0, "p50_ms": 1, "p99_ms": 2},
                                                      {"ef": 20, "recall": 0.99, "qps": 500.0, "p50_ms": 2, "p99_ms": 3}]}],
               "ecommerce": [{"storage": "memory", "writes": {"feed": M.qps_per_core(10, 1, 1)},
                              "queries": {"lexical": [dict(M.qps_per_core(10, 1, 1), threads=1, mean_ms=1.0, p99_ms=2.0)]},
                              "hits": {"lexical": [(["a", "b"], [1.0, 0.5])]}}]}
    add_overlaps(results["ecommerce"])
    assert results["ecommerce"][0]["overlap"] == {"lexical": 1.0}
    R.write(results, tmp_path)
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["machine"]["cores"] and "hits" not in data["ecommerce"][0]
    md = (tmp_path / "report.md").read_text()
    assert "| hnsw | 16 | 100 | 0.1 | 20 | 0.990 | 500 |" in md and "x: not installed" in md
    for png in ("recall_vs_qps.png", "latency_vs_qps.png", "qps_per_core.png"):
        assert (tmp_path / png).read_bytes()[:4] == b"\x89PNG"


def test_the_harness_runs_end_to_end_on_a_tiny_size(tmp_path, monkeypatch):
    """`hybridsearch bench` on tiny data (memory + hnsw, no servers): every table, the JSON and the plots."""
    from hybridsearch.bench import cli
    monkeypatch.setenv("HS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HS_ES_URL", "http://127.0.0.1:1")  # never reachable: the remote rows are skipped
    monkeypatch.setenv("HS_OS_URL", "http://127.0.0.1:1")
    out = tmp_path / "out"
    assert cli.main(["bench", "--size", "tiny", "--out", str(out), "--storages", "memory,hnsw",
                     "--anchors", "none"]) == 0  # the database rows: tests/bench/test_databases.py
    data = json.loads((out / "results.json").read_text())
    assert data["mode"] == "tiny" and {r["storage"] for r in data["six_tasks"]} == {"memory", "hnsw"}
    assert all("error" not in r for r in data["six_tasks"] + data["ann"] + data["ecommerce"]), data
    mem = next(r for r in data["six_tasks"] if r["storage"] == "memory")
    assert mem["recall_at_10"] == pytest.approx(1.0)  # memory is exact
    ann = next(r for r in data["ann"] if r["storage"] == "hnsw")
    assert [p["ef"] for p in ann["points"]] == [16, 64] and all(0 <= p["recall"] <= 1 for p in ann["points"])
    assert ann["points"][-1]["recall"] > 0.8 and ann["points"][-1]["qps"] > 0
    # tiny times 2 interleaved passes: a spread per point, the run judged, and no bold ratio from so few
    assert all(len(p["qps_passes"]) == 2 and p["qps_min"] <= p["qps"] <= p["qps_max"] for p in ann["points"])
    assert data["load"]["cores"] >= 1 and isinstance(data["warnings"], list) and data["comparisons"]
    assert "**" not in (out / "report.md").read_text()
    assert data["ecommerce"][0]["overlap"]["lexical"] == 1.0  # memory against itself
    assert {r["storage"] for r in data["relevance"]} >= {"memory"}
    for png in ("recall_vs_qps.png", "latency_vs_qps.png", "qps_per_core.png"):
        assert (out / png).exists()
    assert "## Six tasks" in (out / "report.md").read_text()


def test_storage_selection_says_why_a_row_cannot_run():
    from hybridsearch.bench.cli import select_storages
    engines = {"elasticsearch": ("http://127.0.0.1:9260", 1), "opensearch": (None, None)}
    present = {"hnswlib"}
    usable, skipped = select_storages(["memory", "hnswlib", "annlite", "elasticsearch", "opensearch"], engines,
                                      lambda m: m in present)
    assert usable == ["memory", "hnswlib"]
    assert skipped == ["annlite: not installed",
                       'elasticsearch: a node answers but its Python client (elasticsearch) is not installed: '
                       'pip install -e ".[elasticsearch]"',
                       "opensearch: no node answers (start one with scripts/searchnode.sh start os)"]
    present |= {"annlite", "elasticsearch"}
    assert select_storages(["annlite", "elasticsearch"], engines, lambda m: m in present) == (
        ["annlite", "elasticsearch"], [])

