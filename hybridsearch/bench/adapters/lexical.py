"""The lexical libraries ours is measured against: bm25s (single field, method="lucene",
PyStemmer) and tantivy (en_stem; fields summed, or the best field with a dismax query).
Analysis matches ours: words, lower case, English Snowball, no stop words; BM25 k1=1.2, b=0.75."""
from __future__ import annotations

import re

from hybridsearch.bench.adapters.base import TextAdapter

_WORD = re.compile(r"[^\W_]+")


def query_words(q: str) -> str:
    """The words of q, lower-cased, space-separated: nothing left for tantivy's query parser to
    read as syntax (- + : ^ * " ( ) [ ] ~ ! or upper-case AND/OR/NOT/IN); the words ours sees."""
    return " ".join(_WORD.findall(q.lower()))


class Bm25s(TextAdapter):
    """bm25s over the fields joined into one text (it has one field per index)."""

    name = "bm25s"
    label = "bm25s (1 field, method='lucene')"
    note = "fields joined into one text, 1 thread"

    def build(self, ids: list, fields: dict, docs: list | None = None) -> None:
        """Tokenises the joined fields with our analysis and indexes them."""
        import bm25s
        import Stemmer
        self.bm25s, self.ids = bm25s, list(ids)
        self.stemmer = Stemmer.Stemmer("english")
        joined = [" ".join(parts) for parts in zip(*fields.values())]
        self.retriever = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
        self.retriever.index(self.tokens(joined), show_progress=False)

    def tokens(self, texts: list):
        """bm25s tokens of texts with our analysis (Snowball, no stop words)."""
        return self.bm25s.tokenize(texts, stopwords=None, stemmer=self.stemmer, show_progress=False)

    def searchers(self, queries: list, k: int) -> dict:
        """"bm25s": retrieve of one tokenised query per call."""
        retrieve, ids = self.retriever.retrieve, self.ids

        def one(i):  # n_threads=0: sequential (n_threads=1 starts a thread pool per call)
            rows, _ = retrieve(self.tokens([queries[i]]), k=min(k, len(ids)), show_progress=False, n_threads=0)
            return [ids[j] for j in rows[0]]
        return {self.name: one}

    def batched(self, queries: list, k: int, threads: int):
        """One retrieve() of all queries, tokenising included (threads: 0 sequential, -1 all cores)."""
        return self.retriever.retrieve(self.tokens(queries), k=k, show_progress=False, n_threads=threads)[0]


class Tantivy(TextAdapter):
    """tantivy with each field as an en_stem text field and an integer id (stored, fast),
    indexed on `threads` threads, committed, merged and reloaded before searching."""

    name = "tantivy"

    def __init__(self, threads: int = 1) -> None:
        self.threads = threads
        self.label = "tantivy (fields summed)"
        self.note = f"en_stem, {threads} indexing threads"

    def build(self, ids: list, fields: dict, docs: list | None = None) -> None:
        """One document per id with its row number; commit, merge, reload."""
        import tantivy
        self.tantivy, self.ids, self.fields = tantivy, list(ids), list(fields)
        sb = tantivy.SchemaBuilder()
        for f in self.fields:
            sb.add_text_field(f, stored=False, tokenizer_name="en_stem")
        sb.add_integer_field("row", stored=True, indexed=True, fast=True)
        self.index = tantivy.Index(sb.build())
        writer = self.index.writer(heap_size=256_000_000 * self.threads, num_threads=self.threads)
        for j, texts in enumerate(zip(*fields.values())):
            writer.add_document(tantivy.Document(row=j, **dict(zip(self.fields, texts))))
        writer.commit()
        writer.wait_merging_threads()
        self.index.reload()
        self.searcher = self.index.searcher()
        self._fast = hasattr(self.searcher, "fast_field_values")  # decided once, not per query
        self.note = f"en_stem, {self.threads} indexing threads, {self.searcher.num_segments} segment(s)"

    def _ids(self, result) -> list:
        addrs = [a for _, a in result.hits]
        if self._fast:
            rows = self.searcher.fast_field_values("row", addrs)
        else:  # older tantivy-py: the stored field
            rows = [self.searcher.doc(a)["row"][0] for a in addrs]
        return [self.ids[j] for j in rows]

    def searchers(self, queries: list, k: int) -> dict:
        """"tantivy": parse_query over all fields (scores summed), count=False (the default
        count=True also counts every match, which defeats top-k pruning: "tantivy count=True");
        "tantivy-dismax": the best field, as ours scores (several fields only)."""
        index, s, fields, tv = self.index, self.searcher, self.fields, self.tantivy

        def summed(i, count=False):
            return self._ids(s.search(index.parse_query(query_words(queries[i]), fields), k, count=count))

        def dismax(i):
            text = query_words(queries[i])
            q = tv.Query.disjunction_max_query([index.parse_query(text, [f]) for f in fields])
            return self._ids(s.search(q, k, count=False))
        out = {"tantivy": summed, "tantivy count=True": lambda i: summed(i, count=True)}
        if len(fields) > 1 and hasattr(tv.Query, "disjunction_max_query"):
            out["tantivy-dismax"] = dismax
        return out
