"""Whether a benchmark's figures can be believed: the machine's load during the run, curves
whose QPS rises with ef (noise, not a property of the index), and the rule for a headline
ratio at a recall target (interpolated on the median curves, with its spread over the
interleaved passes; bold only when every pass says the same)."""
from __future__ import annotations

import math

from hybridsearch.bench.metrics import at_recall, spread

# a rise of QPS with ef smaller than this share is read as a flat stretch (ef below k is
# searched at k, so such points cost the same), not as a broken curve
MONOTONIC_TOLERANCE = 0.05
MIN_PASSES = 3  # fewer passes than this never make a headline


def machine_load(samples: list, cores: int, own_threads: int = 1) -> dict:
    """The load of other programs while the benchmark ran, from 1-minute load averages
    (`samples`, read during the timed passes): the load average counts the benchmark's own
    running threads too, so the others' share is the highest reading minus `own_threads`; the
    machine counts as loaded when that share exceeded the cores left to them (cores minus the
    benchmark's own threads), i.e. when some other program had to take turns with the
    benchmark for a core. -> {"max_load1", "cores", "own_threads", "others", "loaded",
    "warning" (a sentence, or None)}."""
    readings = [float(x) for x in samples if x is not None and math.isfinite(float(x))]
    if not readings:
        return {"max_load1": None, "cores": cores, "own_threads": own_threads, "others": None, "loaded": False,
                "warning": None}
    top = max(readings)
    others = max(0.0, top - own_threads)
    free = max(0, cores - own_threads)
    loaded = others > free
    warning = (f"the machine was loaded: the 1-minute load average reached {top:.2f} on {cores} cores while the "
               f"benchmark ran {own_threads} thread{'s' if own_threads != 1 else ''}, so other programs wanted "
               f"{others:.2f} cores where {free} {'was' if free == 1 else 'were'} free; QPS figures are low and "
               "noisy, ratios less so (the engines were interleaved)") if loaded else None
    return {"max_load1": top, "cores": cores, "own_threads": own_threads, "others": others, "loaded": loaded,
            "warning": warning}


def non_monotonic(points: list, tolerance: float = MONOTONIC_TOLERANCE) -> list:
    """Where a recall-vs-QPS curve (its median QPS per ef) is not monotonic: QPS should fall as
    ef rises. -> [(ef before, ef after, QPS before, QPS after)] for every step, in ef order, where
    QPS rose by more than `tolerance` (a share); [] for a believable curve."""
    pts = sorted((p for p in points if p.get("qps") and p.get("ef") is not None), key=lambda p: p["ef"])
    return [(a["ef"], b["ef"], a["qps"], b["qps"]) for a, b in zip(pts, pts[1:])
            if b["ef"] > a["ef"] and b["qps"] > a["qps"] * (1 + tolerance)]


def pass_curves(points: list) -> list:
    """The curve of each timed pass: one list per pass of {"ef", "recall", "qps" (that pass's)}
    (a point's recall is the same in every pass: the searches are deterministic)."""
    pts = [p for p in points if p.get("qps_passes")]
    n = min((len(p["qps_passes"]) for p in pts), default=0)
    return [[{"ef": p["ef"], "recall": p["recall"], "qps": p["qps_passes"][i]} for p in pts] for i in range(n)]


def compare_at_recall(ours: list, anchor: list, target: float, min_passes: int = MIN_PASSES,
                      caveats: list | tuple = ()) -> dict:
    """Ours against an anchor at `target` recall: QPS interpolated on each one's median curve,
    their ratio, and the ratio's spread over the passes (pass i of ours against pass i of the
    anchor, timed side by side). -> {"target", "ours", "anchor", "ratio", "lo", "hi", "passes",
    "verdict", "bold", "why"}.

    verdict: "faster" / "slower" when every pass's ratio is above / below 1.0, "within noise"
    when they straddle it, "spread unknown" without per-pass figures, "not reached" when a
    curve never gets to the target. bold (a
    headline) only with `min_passes` passes or more, a verdict other than "within noise", both
    curves bracketing the target (not a lower bound from a sweep starting above it), and no
    `caveats` (e.g. a loaded machine or a non-monotonic curve); `why` says what kept it plain."""
    a, b = at_recall(ours, target), at_recall(anchor, target)
    out = {"target": target, "ours": a["qps"], "anchor": b["qps"], "ratio": None, "lo": None, "hi": None,
           "passes": 0, "verdict": "not reached", "bold": False, "why": []}
    if a["qps"] is None or b["qps"] is None:
        out["why"] = [f"{side} {r['how']}" for side, r in (("ours", a), ("anchor", b)) if r["qps"] is None]
        return out
    out["ratio"] = a["qps"] / b["qps"]
    per_pass = []
    for pa, pb in zip(pass_curves(ours), pass_curves(anchor)):
        qa, qb = at_recall(pa, target)["qps"], at_recall(pb, target)["qps"]
        if qa is not None and qb:
            per_pass.append(qa / qb)
    s = spread(per_pass)
    out.update(passes=len(per_pass), lo=s["min"] if per_pass else None, hi=s["max"] if per_pass else None)
    if not per_pass:
        out["verdict"] = "spread unknown"
    elif s["min"] > 1.0:
        out["verdict"] = "faster"
    elif s["max"] < 1.0:
        out["verdict"] = "slower"
    else:
        out["verdict"] = "within noise"
    why = list(caveats)
    if len(per_pass) < min_passes:
        why.insert(0, f"{len(per_pass)} pass{'es' if len(per_pass) != 1 else ''} (a headline needs {min_passes})")
    if out["verdict"] == "within noise":
        why.insert(0, "the passes' ratios straddle 1.0")
    for side, r in (("ours", a), ("the anchor", b)):
        if not r["bracketed"]:
            why.append(f"{side}: a lower bound, {r['how']}")
    out["why"], out["bold"] = why, not why
    return out


def headline(c: dict, label: str) -> str:
    """One line of a report for compare_at_recall's answer `c`, `label` saying what is compared,
    e.g. "recall 0.95, find() on hnsw vs hnswlib knn_query: 9,000 / 10,000 QPS = 0.90× (passes
    0.85–0.97×, 3 passes) — slower": the ratio in bold only when c["bold"]."""
    head = f"recall {c['target']}, {label}"
    if c["ratio"] is None:
        return f"{head}: not reached ({'; '.join(c['why'])})"
    ratio = f"{c['ratio']:.2f}×"
    spread_text = (f" (passes {c['lo']:.2f}–{c['hi']:.2f}×, {c['passes']} passes)" if c["passes"]
                   else " (no pass reached it on its own)")
    return (f"{head}: {c['ours']:,.0f} / {c['anchor']:,.0f} QPS = " + (f"**{ratio}**" if c["bold"] else ratio)
            + spread_text + f" — {c['verdict']}" + (f"; not a headline: {'; '.join(c['why'])}" if c["why"] else ""))


# the ratios a report prints, like with like: (ours, anchor, what is compared, the kinds both
# rows must have); a pair whose rows are of other kinds is not printed
PAIRS = (("hnsw", "hnswlib-raw", "find() on hnsw vs hnswlib knn_query", ("api", "raw")),
         ("ours-raw", "hnswlib-raw", "raw kernel HnswGraph.search vs raw hnswlib knn_query", ("raw", "raw")),
         ("hnsw", "hnswlib", 'find() on hnsw vs find() on storage="hnswlib"', ("api", "api")))
TARGETS = (0.9, 0.95, 0.99)


def _curve_key(row: dict) -> tuple:
    return row.get("dataset", "sift-like"), row.get("m"), row.get("ef_construct")


def assess(results: dict, loadavg_samples: list | None = None, cores: int | None = None,
           pairs=PAIRS, targets=TARGETS) -> dict:
    """Judges a harness run's recall-vs-QPS rows in place and returns `results` with:
    "load" (machine_load of the load averages read before every timed segment, or of
    `loadavg_samples`; one benchmark thread; `cores` default: the machine facts' available
    cores), every row's "non_monotonic" steps, "comparisons" (compare_at_recall per like-with-like
    pair of PAIRS per data set and graph setting, per target, with "label", "dataset", "m",
    "ef_construct") and "warnings" (one sentence each: a loaded machine, a non-monotonic curve)."""
    rows = [r for r in results.get("ann", []) if "points" in r]
    samples = loadavg_samples if loadavg_samples is not None else \
        [p["load1"] for r in rows for p in r["points"] if p.get("load1") is not None]
    facts = results.get("machine", {})
    load = machine_load(samples, cores or facts.get("cores_available") or facts.get("cores") or 1, 1)
    results["load"] = load
    warnings = [load["warning"]] if load["warning"] else []
    for r in rows:
        r["non_monotonic"] = non_monotonic(r["points"])
        if r["non_monotonic"]:
            steps = "; ".join(f"ef {a}→{b}: {qa:,.0f}→{qb:,.0f} QPS" for a, b, qa, qb in r["non_monotonic"])
            warnings.append(f"{r['storage']} (m={r['m']}, ef_construct={r['ef_construct']}): QPS rose as ef rose "
                            f"({steps}): that stretch of the curve is noise, and no ratio on it is a headline")
    by_key: dict = {}
    for r in rows:
        by_key.setdefault(_curve_key(r), {})[r["storage"].split(" (")[0]] = r
    comparisons = []
    for key, named in by_key.items():
        for ours, anchor, label, kinds in pairs:
            a, b = named.get(ours), named.get(anchor)
            if a is None or b is None or (a.get("kind"), b.get("kind")) != kinds:
                continue
            caveats = (["the machine was loaded"] if load["loaded"] else []) + \
                [f"{r['storage']}'s curve is not monotonic" for r in (a, b) if r["non_monotonic"]]
            for t in targets:
                c = compare_at_recall(a["points"], b["points"], t, caveats=caveats)
                comparisons.append(dict(c, label=label, dataset=key[0], m=key[1], ef_construct=key[2]))
    results["comparisons"], results["warnings"] = comparisons, warnings
    return results
