"""A text query as the lexical index takes it: its words, its syntax, its options.

The syntax (docs/usage.md, "Text query syntax") is parsed here, before any analysis, into
clauses; each storage's lexical engine analyses each clause per field. Parsing never fails:
whatever is not syntax is literal text, analysed as usual.

    "quoted phrase"   the words in sequence, in one field
    +word  -word      required / excluded (also +"a phrase", -"a phrase", +pre*, -pre*)
    pre*              any word starting with "pre" (2 or more letters or digits, then one *)
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Optional

OPERATORS = ("or", "and")
SHOULD, MUST, MUST_NOT = "should", "must", "must_not"
MIN_PREFIX = 2  # characters before the * of a prefix; "a*" is the literal word "a"


@dataclass(frozen=True)
class TextQuery:
    """The words of a text find, with:

    `fields`: ((hs.Text field, weight), ...) to score only those fields, each field's BM25
    multiplied by its weight before the best field wins (None: every text field, weight 1);
    `operator`: "or" (a document needs one of the clauses) or "and" (every clause without a
    sign is required)."""

    text: str
    fields: Optional[tuple] = None
    operator: str = "or"


@dataclass(frozen=True)
class Clause:
    """One piece of a parsed query. kind: "words" (literal text: each of its terms is a clause of
    its own), "phrase" (the terms of `text` at consecutive positions) or "prefix" (`text` is the
    prefix, without its *); occur: "should", "must" or "must_not"."""

    kind: str
    occur: str
    text: str


def _is_prefix(body: str) -> bool:
    """`body` is letters and digits then a single trailing *, with at least MIN_PREFIX before it."""
    return body.endswith("*") and len(body) > MIN_PREFIX and body[:-1].isalnum()


@lru_cache(maxsize=4096)
def parse_text(text: str) -> tuple:
    """The clauses of a query string, in order (never raises).

    Scanning from the left, whitespace separates clauses. A clause may start with "+" (must) or
    "-" (must not) directly followed by its body; a lone sign is literal. A body starting with a
    double quote that is closed later is a phrase (the text up to the closing quote; the next
    clause may follow the quote at once); an unclosed quote is a literal character. Any other
    body runs to the next whitespace: a prefix when it is letters and digits (at least two) and
    one trailing "*", else literal words. Quotes, signs and "*" elsewhere are literal characters,
    which the analyzer drops as it drops every character that is not part of a word."""
    out = []
    i, n = 0, len(text)
    while i < n:
        if text[i].isspace():
            i += 1
            continue
        occur, j = SHOULD, i
        if text[j] in "+-" and j + 1 < n and not text[j + 1].isspace():
            occur, j = (MUST if text[j] == "+" else MUST_NOT), j + 1
        if text[j] == '"':
            close = text.find('"', j + 1)
            if close != -1:
                out.append(Clause("phrase", occur, text[j + 1:close]))
                i = close + 1
                continue
        e = j
        while e < n and not text[e].isspace():
            e += 1
        body = text[j:e]
        if _is_prefix(body):
            out.append(Clause("prefix", occur, body[:-1]))
        else:
            out.append(Clause("words", occur, body))
        i = e
    return tuple(out)


def uses_syntax(clauses: tuple) -> bool:
    """Whether parsed clauses are more than plain words (a phrase, a sign or a prefix): a plain
    query means the same to every engine, the syntax only to those that declare it."""
    return any(c.kind != "words" or c.occur != SHOULD for c in clauses)
