"""A text query (docs/usage.md "Text query syntax", operator=, text_fields=) as a YQL condition.

The query is parsed by hybridsearch.query.text and compiled here to YQL terms; it is never
handed to Vespa's `userInput()`, whose own syntax would read `a*`, a stray `"`, `field:x`
or `wi-fi` as operators, field names or phrases where our syntax reads literal words.
Literal text is split into words as the embedded analyzer splits it (letters and digits;
every other character separates words) and each word becomes one `contains` term, written
as an escaped YQL string literal; Vespa then stems and normalises it as the field says.

Each field on its own, as on the embedded storages: a document matches in a field when
every required clause matches there (the optional ones then only score, through `rank()`),
or, with no required clause, when one optional clause does; an excluded clause found in
any searched field removes the document. A phrase is `phrase(...)`; a prefix searches the
field's word array `hs_words_<field>` (app.py: Vespa has no prefix search in an index).
A query with nothing positive matches nothing ("false").
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from hybridsearch.document import Analyzer
from hybridsearch.engine.analysis import analyzer_for
from hybridsearch.query.text import MUST, MUST_NOT, SHOULD, TextQuery, parse_text
from hybridsearch.storages.remote.vespa.app import weight_input, words_field
from hybridsearch.storages.remote.vespa.yql import string_literal

# words as the embedded analyzer cuts them, case and endings left to Vespa's linguistics
_WORDS = analyzer_for(Analyzer(stemmer=None, lowercase=False))
WEAK_AND_TARGET = 100  # Vespa's default targetHits of weakAnd


@dataclass(frozen=True)
class Term:
    """One searchable piece of the query: kind "word", "phrase" or "prefix", its occur and words."""

    kind: str
    occur: str
    words: tuple


def terms(text: str, operator: str) -> list:
    """The query's terms in order: a words clause gives one term per word, a phrase of one
    word is that word, a clause without words is dropped; operator="and" makes every
    unsigned clause required."""
    out = []
    for c in parse_text(text):
        occur = MUST if (c.occur == SHOULD and operator == "and") else c.occur
        if c.kind == "prefix":
            out.append(Term("prefix", occur, (c.text,)))
            continue
        words = tuple(_WORDS.words(c.text))
        if c.kind == "phrase" and len(words) > 1:
            out.append(Term("phrase", occur, words))
        else:
            out += [Term("word", occur, (w,)) for w in words]
    return out


def item(field: str, term: Term) -> str:
    """The YQL of one term searching one field."""
    if term.kind == "prefix":
        return f"{words_field(field)} contains ({{prefix: true}}{string_literal(term.words[0])})"
    if term.kind == "phrase":
        return f"{field} contains phrase({', '.join(string_literal(w) for w in term.words)})"
    return f"{field} contains {string_literal(term.words[0])}"


def _join(op: str, parts: list) -> str:
    return parts[0] if len(parts) == 1 else "(" + f" {op} ".join(parts) + ")"


def _in_field(field: str, musts: list, shoulds: list) -> str:
    """Where the field matches: all its required terms (the optional ones rank beside them)."""
    core = _join("and", [item(field, t) for t in musts])
    return core if not shoulds else f"rank({core}, {', '.join(item(field, t) for t in shoulds)})"


def condition(text: str, fields: list, operator: str = "or", grammar: str = "any",
              target: Optional[int] = None) -> str:
    """The YQL condition of a text query over `fields` (the hs.Text fields searched).
    grammar "weakAnd" turns a query of optional terms only into Vespa's weakAnd over every
    (field, term) pair, keeping the `target` best (at least Vespa's default of 100);
    "all" makes every unsigned clause required, as operator="and"."""
    if grammar == "all":
        operator = "and"
    ts = terms(text, operator)
    musts = [t for t in ts if t.occur == MUST]
    shoulds = [t for t in ts if t.occur == SHOULD]
    nots = [t for t in ts if t.occur == MUST_NOT]
    if not musts and not shoulds:
        return "false"  # only exclusions, or no word: nothing to rank by
    if musts:
        positive = _join("or", [_in_field(f, musts, shoulds) for f in fields])
    else:  # optional terms only: a document needs one of them in any field
        pairs = [item(f, t) for f in fields for t in shoulds]
        if grammar == "weakAnd":
            positive = f"({{targetHits: {max(WEAK_AND_TARGET, target or 0)}}}weakAnd({', '.join(pairs)}))"
        else:
            positive = _join("or", pairs)
    if not nots:
        return positive
    return f"{positive} and !({' or '.join(item(f, t) for t in nots for f in fields)})"


def parts(text, texts: list) -> tuple:
    """(query string, [(field, weight)], operator) of what a find passes: a string, or a
    TextQuery with field weights and an operator."""
    if isinstance(text, TextQuery):
        fields = list(text.fields) if text.fields else [(t, 1.0) for t in texts]
        return text.text, fields, text.operator
    return text, [(t, 1.0) for t in texts], "or"


def weights(fields: list) -> dict:
    """The request parameters setting each searched field's weight input (rank profiles
    `bm25` and `hybrid`); fields left at their default weight 1 are not sent."""
    return {f"input.{weight_input(f)}": w for f, w in fields if w != 1.0}
