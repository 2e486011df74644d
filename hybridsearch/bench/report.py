"""The harness's report: results.json, report.md (every table of the run, with ratios against
the anchors measured in the same run) and the PNG plots, in the folder the user names."""
from __future__ import annotations

import json
from pathlib import Path

from hybridsearch.bench.machine import describe
from hybridsearch.bench.stability import assess, headline
from hybridsearch.bench.plots import plots
from hybridsearch.bench.tables import fmt, markdown_table


def _error_row(r: dict, width: int) -> list:
    return [r.get("storage", "?"), f"error: {r['error']}"] + [""] * (width - 2)


def _ann(results: dict) -> list:
    ann = results.get("ann", [])
    if not ann:
        return []
    header = ["storage", "m", "ef_construct", "build s", "ef", "recall@10", "QPS", "QPS min–max", "p99 ms", "timed"]
    rows = []
    for r in ann:
        if "error" in r:
            rows.append(_error_row(r, len(header)))
            continue
        rows += [[r["storage"], r["m"], r["ef_construct"], fmt(r["build_s"], 1), p["ef"], fmt(p.get("recall"), 3),
                  fmt(p.get("qps")), _range(p), fmt(p.get("p99_ms"), 2), r.get("label", "")] for p in r["points"]]
    out = ["## Recall@10 vs QPS (one query per call, one thread)", "", results.get("ann_data", ""), ""]
    out += markdown_table(header, rows) + ["", "![recall vs QPS](recall_vs_qps.png)", ""]
    comparisons = results.get("comparisons", [])
    if comparisons:
        out += ["QPS at equal recall, interpolated on the median curves; the spread is the ratio's min–max "
                "over the passes (each pass times both engines side by side), and a ratio is in bold only "
                "when every pass agrees on its side of 1.0:", ""]
        for c in comparisons:
            where = f"{c['dataset']}, m={c['m']}, ef_construct={c['ef_construct']}: "
            out.append(f"- {where}{headline(c, c['label'])}")
        out.append("")
    return out


def _range(p: dict) -> str:
    """A point's QPS spread over its passes as "min–max" ("–" without one)."""
    if p.get("qps_min") is None:
        return "–"
    return f"{fmt(p['qps_min'])}–{fmt(p['qps_max'])}"


def _warnings(results: dict) -> list:
    """The run's warnings (a loaded machine, non-monotonic curves) as a section at the top."""
    ws = results.get("warnings") or []
    return ["## Warnings", ""] + [f"- WARNING: {w}" for w in ws] + [""] if ws else []


TASKS = ("read", "update", "delete", "find_by_condition", "find_by_vector")


def _six_tasks(results: dict) -> list:
    six = results.get("six_tasks", [])
    if not six:
        return []
    names = [t.replace("_", " ") for t in TASKS]
    ms_header = ["storage", "create s"] + [f"{t} ms" for t in names] + ["recall@10"]
    ms_rows = [_error_row(r, len(ms_header)) if "error" in r else
               [r["storage"], fmt(r["create_s"], 2)] + [fmt(r[t]["ms"], 3) for t in TASKS] + [fmt(r["recall_at_10"], 3)]
               for r in six]
    qps_rows = [[r["storage"]] + [fmt(r[t]["qps"]) for t in TASKS] for r in six if "error" not in r]
    return (["## Six tasks (DocArray's one-million benchmark, scaled)", "", results.get("six_tasks_data", ""), ""]
            + markdown_table(ms_header, ms_rows) + [""]
            + markdown_table(["storage"] + [f"{t} QPS" for t in names], qps_rows) + [""])


def _ecommerce_ratios(eco: list) -> list:
    one = {r["storage"]: r["queries"] for r in eco if "queries" in r}
    lines = []
    for ours in ("memory", "hnsw", "sqlite"):
        for other in ("bm25s", "tantivy", "elasticsearch", "opensearch", "annlite"):
            for q in ("lexical", "vector", "hybrid"):
                a, b = one.get(ours, {}).get(q), one.get(other, {}).get(q)
                if isinstance(a, list) and isinstance(b, list) and a and b:
                    lines.append(f"- {q}: {ours} / {other} = {a[0]['qps'] / b[0]['qps']:.1f}× QPS, "
                                 f"{a[0]['qps_per_core'] / b[0]['qps_per_core']:.1f}× QPS per core")
    return ["", "Ratios at one client thread:", ""] + lines if lines else []


def _ecommerce(results: dict) -> list:
    eco = results.get("ecommerce", [])
    if not eco:
        return []
    header = ["storage", "query", "threads", "QPS", "mean ms", "p99 ms", "cores", "QPS/core", "overlap@10 vs memory"]
    rows = []
    for r in eco:
        if "error" in r:
            rows.append(_error_row(r, len(header)))
            continue
        for q, runs in r["queries"].items():
            if isinstance(runs, dict):
                rows.append([r["storage"], q, "–", runs["error"]] + [""] * 5)
                continue
            ov = r.get("overlap", {}).get(q)
            rows += [[r["storage"], q, x["threads"], fmt(x["qps"]), fmt(x["mean_ms"], 2), fmt(x["p99_ms"], 2),
                      fmt(x["cores"], 2), fmt(x["qps_per_core"]), fmt(ov, 2)] for x in runs]
    writes = [[r["storage"], phase, fmt(w["qps"]), fmt(w["cores"], 2), fmt(w["qps_per_core"])]
              for r in eco for phase, w in r.get("writes", {}).items()]
    return (["## E-commerce workload", "", results.get("ecommerce_data", ""), ""] + markdown_table(header, rows)
            + _ecommerce_ratios(eco) + ["", "Writes:", ""]
            + markdown_table(["storage", "phase", "docs/s", "cores", "docs/s per core"], writes)
            + ["", "![latency vs QPS](latency_vs_qps.png)", "", "![QPS per core](qps_per_core.png)", ""])


def _relevance(results: dict) -> list:
    rel = results.get("relevance", [])
    if not rel:
        return []
    rows = [_error_row(r, 4) if "error" in r else
            [r["storage"], fmt(r["ndcg@10"], 3), fmt(r["recall@100"], 3), fmt(r.get("qps"))] for r in rel]
    return (["## Relevance (nave-kjv, lexical)", "", results.get("relevance_data", ""), ""]
            + markdown_table(["storage", "nDCG@10", "recall@100", "QPS"], rows) + [""])


def markdown(results: dict) -> str:
    """The report: the run's warnings, then every table, with the ratios against the anchors
    where they ran (the run judged by stability.assess first, unless it already was)."""
    if "comparisons" not in results:
        assess(results)
    out = [f"# hybridsearch benchmark ({results['mode']})", "", f"Machine: {describe(results['machine'])}", ""]
    out += _warnings(results) + _ann(results) + _six_tasks(results) + _ecommerce(results) + _relevance(results)
    if results.get("skipped"):
        out += ["## Not run", ""] + [f"- {s}" for s in results["skipped"]] + [""]
    return "\n".join(out)


def write(results: dict, out: Path) -> None:
    """results.json (without the per-query hits; with the judgement of stability.assess: "load",
    "warnings", "comparisons"), the plots, and report.md into `out`."""
    if "comparisons" not in results:
        assess(results)
    out.mkdir(parents=True, exist_ok=True)
    slim = json.loads(json.dumps(results, default=float))
    for r in slim.get("ecommerce", []):
        r.pop("hits", None)  # per-query result lists: large, and only needed for the overlaps
    (out / "results.json").write_text(json.dumps(slim, indent=1))
    results["plots"] = plots(results, out)
    (out / "report.md").write_text(markdown(results))
