"""What `hybridsearch bench` does with its recall-vs-QPS sweeps, through the functions it calls
(workloads.ann.sweep, report.markdown): whole sweeps interleaved engine by engine, pass after
pass, and no bold ratio from a run of single passes (a new user saw "0.27×" then "0.74×" in
bold from two runs of one noisy pass each)."""
import numpy as np

from hybridsearch.bench import machine
from hybridsearch.bench import report as R
from hybridsearch.bench.adapters.base import VectorAdapter
from hybridsearch.bench.workloads.ann import sweep


class _Fake(VectorAdapter):
    """An index whose searcher records when it is made, returning the query's own row."""

    def __init__(self, name, log):
        super().__init__()
        self.name, self.log = name, log

    def searcher(self, k, ef, sel=None, query=None, mode=None):
        self.log.append((self.name, ef))
        return lambda q: q

    def ids(self, out):
        return np.asarray([int(out[0, 0])], dtype=np.int64)


def test_the_ann_sweep_interleaves_whole_sweeps_and_reports_the_spread():
    """workloads.ann.sweep (what `hybridsearch bench` runs) in the order A sweep, B sweep, A, B, A, B."""
    log = []
    X = np.arange(6, dtype=np.float32).reshape(6, 1)
    Q, gt = X[:3], np.arange(3).reshape(3, 1)
    curves = sweep([_Fake("A", log), _Fake("B", log)], X, Q, gt, "l2", [10, 20], k=1, passes=3)
    warmups_and_segments = [(n, ef) for _ in range(3) for n in ("A", "B") for ef in (10, 20)]
    assert log == warmups_and_segments
    for pts in curves.values():
        assert [p["ef"] for p in pts] == [10, 20] and all(p["recall"] == 1.0 for p in pts)
        assert all(len(p["qps_passes"]) == 3 and p["qps_min"] <= p["qps"] <= p["qps_max"] for p in pts)


def _results(ours_pts, anchor_pts):
    row = {"m": 16, "ef_construct": 100, "build_s": 0.1}
    return {"mode": "quick", "machine": machine.machine_facts(), "skipped": [], "ann_data": "synthetic",
            "ann": [dict(row, storage="hnsw", label='find() on storage="hnsw"', kind="api", points=ours_pts),
                    dict(row, storage="hnswlib-raw", label="hnswlib knn_query (its Python API)", kind="raw",
                         points=anchor_pts)]}


def test_a_single_pass_run_prints_no_bold_ratio(tmp_path):
    """The report of a run whose points come from one pass each (the new user's 0.27× / 0.74×)."""
    ours = [{"ef": 10, "recall": 0.9, "qps": 700.0, "p99_ms": 1.0},
            {"ef": 20, "recall": 1.0, "qps": 300.0, "p99_ms": 2.0}]
    anchor = [{"ef": 10, "recall": 0.9, "qps": 1000.0, "p99_ms": 1.0},
              {"ef": 20, "recall": 1.0, "qps": 500.0, "p99_ms": 2.0}]
    md = R.markdown(_results(ours, anchor))
    assert "find() on hnsw vs hnswlib knn_query" in md and "**" not in md
