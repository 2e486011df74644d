"""Relevance of lexical search on a judged collection (nave-kjv or any BEIR-style folder):
nDCG@10 and recall@100 of ours on a storage, or of bm25s, with the same queries; and its speed."""
from __future__ import annotations

import numpy as np

from hybridsearch.bench.adapters.lexical import Bm25s
from hybridsearch.bench.adapters.ours import Texts
from hybridsearch.bench.metrics import ndcg_at_k, recall_of_relevant
from hybridsearch.bench.timing import timed


def relevance(name: str, rel, options: dict, tmp: str) -> dict:
    """{"storage", "ndcg@10", "recall@100", "qps" (top-10, one query per call), "queries"} of
    ours on the storage `name` (options go to it), or of bm25s when name is "bm25s"."""
    a = Bm25s() if name == "bm25s" else Texts(name, name, tmp=tmp, **options)
    a.build([d["id"] for d in rel.corpus], {"text": [d["text"] for d in rel.corpus]})
    qids = list(rel.queries)
    texts = [rel.queries[q] for q in qids]
    top100 = a.searchers(texts, 100)[name]
    runs = [top100(i) for i in range(len(qids))]
    qps = timed(a.searchers(texts, 10)[name], list(range(len(qids))), passes=1)["qps"]
    a.close()
    return {"storage": name, "ndcg@10": float(np.mean([ndcg_at_k(r, rel.qrels[q], 10) for r, q in zip(runs, qids)])),
            "recall@100": float(np.mean([recall_of_relevant(r, rel.qrels[q], 100) for r, q in zip(runs, qids)])),
            "qps": qps, "queries": len(qids)}
