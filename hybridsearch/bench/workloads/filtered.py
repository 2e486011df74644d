"""Filtered ANN across selectivities: ours through the DocumentArray API (storage="hnsw", its
planner choosing per query) against hnswlib with its filter callable, on the same SIFT-like
data, m, ef_construct and ef; `bucket < t` filters on an int column of uniform buckets from
0.1 % to 90 %; recall@10 against the exact top-10 among the matching rows next to every QPS."""
from __future__ import annotations

import re

import numpy as np

from hybridsearch.bench import vectors as V
from hybridsearch.bench.adapters.base import GraphConfig
from hybridsearch.bench.workloads.ann import build_all, filtered

PCTS = (0.1, 0.5, 1, 2, 5, 10, 20, 30, 50, 70, 90)
BUCKETS = 10_000  # 0.01 % per bucket: every selectivity of PCTS is a whole number of buckets
OURS, ANCHOR = "hnsw", "hnswlib-raw"


def data(n: int, nq: int, nwarm: int) -> tuple:
    """(X, timed queries, warm-up queries, bucket column) of the SIFT-like set."""
    X, Qall = V.sift_like(n, nq + nwarm)
    return X, Qall[:nq], Qall[nq:], V.buckets(n, count=BUCKETS)


def _quotient(a: dict, b: dict):
    return a["qps"] / b["qps"] if "qps" in a and b.get("qps") else None


def rows(res: dict) -> list:
    """One flat row per selectivity: matches, ours' and hnswlib's recall / QPS, the ratio, the
    plan, hnswlib at the beam ours walked with ("beam", when that differs from ef), and every
    other index's result ("others": name -> recall / QPS)."""
    out = []
    for pct, f in res.items():
        o, h = f["results"].get(OURS, {}), f["results"].get(ANCHOR, {})
        b = f.get("beam", {})
        others = {v: r for v, r in f["results"].items() if v not in (OURS, ANCHOR)}  # e.g. database anchors
        out.append({"pct": pct, "matches": f["matches"], "ours": o, "hnswlib": h, "ratio": _quotient(o, h),
                    "plan": o.get("plan"), "beam": b, "beam_ratio": _quotient(o, b) if b else None,
                    "others": others})
    return out


def beam_of(plan: str | None) -> int | None:
    """The ef of a graph plan as Collection.plan prints it ("graph (ef 26)"), else None."""
    m = re.match(r"graph \(ef (\d+)\)", plan or "")
    return int(m.group(1)) if m else None


def anchor_at_beam(built: list, X, Q, Qwarm, bucket, res: dict, ef: int, passes: int, log=None) -> None:
    """Where ours walked a beam other than `ef`, hnswlib again at that beam (its filtered beam
    also holds allowed results only): the same work, so the ratio at equal walk width."""
    hl = next((a for a in built if a.name == ANCHOR), None)
    for pct, f in res.items():
        beam = beam_of(f["results"].get(OURS, {}).get("plan"))
        if hl is None or beam is None or beam == ef:
            continue
        r = filtered([hl], X, Q, bucket, "l2", [pct], beam, passes=passes, Qwarm=Qwarm, count=BUCKETS)[pct]
        f["beam"] = {"ef": beam, **r["results"][ANCHOR]}
        if log:
            log(f"  filter {pct}%: hnswlib at ours' beam ef={beam}: {f['beam'].get('recall', 0):.3f}/"
                f"{f['beam'].get('qps', 0):,.0f} qps")


def run(n: int, nq: int, cfg: GraphConfig, ef: int, pcts=PCTS, passes: int = 3, nwarm: int = 50,
        tmp: str = "/tmp", log=None, names=(OURS, ANCHOR), **options) -> dict:
    """Builds the indexes of `names` on n SIFT-like vectors and measures filtered find at every
    selectivity of `pcts` on one thread -> {"n", "d", "ef", "build", "failed", "rows"}; `options`
    go to ours' storage (e.g. filter_ef)."""
    from threadpoolctl import threadpool_limits
    X, Q, Qwarm, bucket = data(n, nq, nwarm)
    built, failed = build_all(list(names), X, bucket, "l2", cfg, tmp, log=log, **options)
    with threadpool_limits(limits=1):
        res = filtered(built, X, Q, bucket, "l2", pcts, ef, passes=passes, Qwarm=Qwarm, log=log,
                       count=BUCKETS)
        anchor_at_beam(built, X, Q, Qwarm, bucket, res, ef, passes, log)
    build = {a.name: a.build_s for a in built}
    for a in built:
        a.close()
    return {"n": n, "d": int(X.shape[1]), "queries": nq, "ef": ef, "build": build, "failed": failed,
            "rows": rows(res)}


def plot(result: dict, path) -> None:
    """QPS (log) and recall@10 against selectivity (log x) of ours and hnswlib, into a PNG."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7.5, 6.5), sharex=True)
    for key, label in (("ours", 'ours (storage="hnsw")'), ("hnswlib", "hnswlib (filter callable)")):
        pts = [(r["pct"], r[key]) for r in result["rows"] if "qps" in r[key]]
        xs = np.array([p for p, _ in pts], dtype=float)
        top.plot(xs, [v["qps"] for _, v in pts], marker="o", label=label)
        bottom.plot(xs, [v["recall"] for _, v in pts], marker="o", label=label)
    for r in result["rows"]:  # the plan ours chose, by each point
        if r["plan"] and "qps" in r["ours"]:
            top.annotate(r["plan"].split()[0], (r["pct"], r["ours"]["qps"]), fontsize=6,
                         textcoords="offset points", xytext=(0, 6), ha="center")
    top.set_yscale("log")
    top.set_ylabel("QPS (1 thread)")
    bottom.set_ylabel("recall@10")
    bottom.axhline(0.95, color="grey", lw=0.8, ls="--")
    bottom.set_xscale("log")
    bottom.set_xlabel("selectivity (% of documents matching the filter)")
    for ax in (top, bottom):
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    top.set_title(f"Filtered top-10, {result['n']:,} x {result['d']}, ef={result['ef']}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
