"""The libraries the benchmarks compare, one shape per kind: VectorAdapter (ours through the
API or raw, hnswlib, faiss), TextAdapter (ours, bm25s, tantivy), plus sqlite-vec and the remote
engines' nodes. Optional libraries are imported only when an adapter of theirs is built."""
