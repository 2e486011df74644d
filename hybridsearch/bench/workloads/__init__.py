"""What the benchmarks run, one module per workload: ann (recall vs QPS, filtered search),
storage_tasks (DocArray's six tasks), ecommerce (queries over client threads, writes),
relevance (nDCG on judged queries), lexical (BM25 libraries side by side), exact (exact top-k
against numpy and faiss), sqlite (against sqlite-vec), contention (reads under writers)."""
