"""The lexical query of a text find as Elasticsearch / OpenSearch query DSL (pure functions, no I/O).

A plain query (words only) is one `multi_match` `best_fields`, with `text_fields` weights as
`field^weight` and `operator`. A query using the syntax (docs/usage.md, "Text query syntax";
parsed by hybridsearch.query.text) becomes, per searched field, a `bool` of its required clauses
(`must`) and its optional ones (`should`, one needed when nothing is required) boosted by the
field's weight; a `dis_max` of those (tie_breaker 0) lets the best field win, as `best_fields`
does, and the excluded clauses are a `must_not` over every searched field, so exclusion is per
document. Clauses:

    words     `match` (operator "and" when required: each of its terms is required)
    "phrase"  `match_phrase` (slop 0: Lucene's PhraseQuery, BM25 of its terms at the phrase frequency)
    pre*      `prefix` on the lowercased prefix with `rewrite: constant_score`: it scores a
              constant, the field's weight, for every document holding such a term

The index analyses text with the `standard` analyzer (lowercased words, no stemming), so the
terms a prefix expands to are the indexed words starting with it, which is what the embedded
storages match for an unstemmed field.
"""
from __future__ import annotations

from typing import Optional

from hybridsearch.document import Analyzer
from hybridsearch.engine.analysis import analyzer_for
from hybridsearch.query.text import MUST, MUST_NOT, SHOULD, TextQuery, parse_text, uses_syntax

# which clauses hold a word at all: ours and the standard analyzer both take runs of letters and
# digits as words, and a clause without one is dropped (docs/usage.md), not sent: a required
# `match` of no term would match nothing instead of nothing being required
_WORDS = analyzer_for(Analyzer(stemmer=None))
NOTHING = {"bool": {"must_not": [{"match_all": {}}]}}


def text_clause(text, fields: list, constant: float = 1.0) -> dict:
    """The scoring query of `text` (a string or a TextQuery) over the text `fields` (the schema's
    hs.Text fields, used when the query names none). `constant`: the engine score that reads as
    1 once the storage scaled it (Elasticsearch's BM25 is 2.2x Lucene's), a prefix's score."""
    raw, weights, operator = _parts(text, fields)
    clauses = parse_text(raw)
    if not uses_syntax(clauses):
        return multi_match(raw, weights, operator)
    kept = [(c.kind, MUST if c.occur == SHOULD and operator == "and" else c.occur, c.text)
            for c in clauses if c.kind == "prefix" or _WORDS.words(c.text)]
    scoring = [c for c in kept if c[1] != MUST_NOT]
    if not scoring:  # only excluded clauses, or no word: nothing to rank by, so no match
        return NOTHING
    per_field = [_field_query(scoring, f, w, constant) for f, w in weights]
    out = {"bool": {"must": [{"dis_max": {"queries": per_field, "tie_breaker": 0.0}}]}}
    excluded = [_clause(c, f, constant) for c in kept if c[1] == MUST_NOT for f, _ in weights]
    if excluded:
        out["bool"]["must_not"] = excluded
    return out


def _parts(text, fields: list) -> tuple:
    """(query string, [(field, weight)], operator) of a string or a TextQuery."""
    if isinstance(text, TextQuery):
        weights = list(text.fields) if text.fields else [(f, 1.0) for f in fields]
        return text.text, weights, text.operator
    return text, [(f, 1.0) for f in fields], "or"


def multi_match(raw: str, weights: list, operator: str = "or") -> dict:
    """Plain words: `multi_match` `best_fields`, each field's score times its weight."""
    body = {"query": raw, "fields": [f if w == 1.0 else f"{f}^{w!r}" for f, w in weights],
            "type": "best_fields"}
    if operator == "and":  # every word in one field
        body["operator"] = "and"
    return {"multi_match": body}


def _field_query(clauses: list, field: str, weight: float, constant: float) -> dict:
    """One field's match: its required clauses all, and one optional one when none is required."""
    must = [_clause(c, field, constant) for c in clauses if c[1] == MUST]
    should = [_clause(c, field, constant) for c in clauses if c[1] == SHOULD]
    body = {"must": must, "should": should, "minimum_should_match": 0 if must else 1}
    if weight != 1.0:
        body["boost"] = weight
    return {"bool": body}


def _clause(clause: tuple, field: str, constant: float) -> dict:
    """One clause (kind, occur, text) on one field."""
    kind, occur, text = clause
    if kind == "phrase":
        return {"match_phrase": {field: {"query": text}}}
    if kind == "prefix":
        # not analysed by the engine: lowercased here as the index's words are
        return {"prefix": {field: {"value": text.lower(), "rewrite": "constant_score", "boost": constant}}}
    # several words under one sign are each that sign: all required, or any one optional / excluding
    return {"match": {field: {"query": text, "operator": "and" if occur == MUST else "or"}}}
