"""The text query syntax ("phrases", +required, -excluded, prefix*, operator="and") against a
plain-Python model written from docs/usage.md ("Text query syntax"), through find, count, facets,
sort and hybrid finds, writes, and reopening from files.

The model tokenizes with tests/models.py's english_tokens (as tests/contract/test_lexical.py does)
and evaluates a query given as clauses; the test renders the clauses into the query string, so the
model needs no parser of its own (tests/engine/test_text_syntax.py checks the parser).

On Elasticsearch and OpenSearch (the `standard` analyzer: no stemming) the collection is
test_lexical's PlainProduct and the model tokenizes without stemming; there scores are compared
with the model's until a document is deleted or overwritten, and the hits with its matches after
(test_lexical.py says why)."""
import math
import re
from collections import Counter

import numpy as np
import pytest
import Stemmer
from hypothesis import given, settings
from hypothesis import strategies as st

import hybridsearch as hs
from tests.contract.test_lexical import (FIXTURES, REMOTE, WORDS, Product, assert_hits_match, assert_topk,
                                         cosine, random_docs, schema_and_tokens)
from tests.models import english_tokens

K1, B = 1.2, 0.75
FIELDS = ("title", "description")
STORAGES = ["memory", "hnsw", "sqlite", "elasticsearch", "opensearch"]
_STEM = Stemmer.Stemmer("english")


class Model:
    """Documents by id, and per text field every word ever written to it (a prefix matches the
    terms such words were indexed as, docs/usage.md). `tokens`: the analysis of the storage's
    index (english_tokens, or test_lexical.plain_tokens on the search engines)."""

    def __init__(self, tokens=english_tokens):
        self.docs = {}
        self.seen = {f: set() for f in FIELDS}
        self.tokens = tokens
        self.stem = _STEM.stemWord if tokens is english_tokens else (lambda w: w)

    def write(self, doc: dict) -> None:
        self.docs[doc["id"]] = {**self.docs.get(doc["id"], {}), **doc}
        for f in FIELDS:
            self.seen[f] |= set(re.findall(r"[a-z0-9]+", (doc.get(f) or "").lower()))

    def update(self, id_, **fields):
        self.write({"id": id_, **fields})

    def delete(self, ids):
        for i in ids:
            self.docs.pop(i, None)

    def find(self, clauses, operator="or", boosts=None):
        """{id: score} of the documents the query matches."""
        boosts = boosts or {f: 1.0 for f in FIELDS}
        best, excluded = {}, set()
        for f, boost in boosts.items():
            toks = {i: self.tokens(d.get(f) or "") for i, d in self.docs.items()}
            live = {i: t for i, t in toks.items() if t}
            if not live:
                continue
            n = len(live)
            avgdl = sum(map(len, live.values())) / n

            def idf(t):
                df = sum(1 for u in live.values() if t in u)
                return math.log(1 + (n - df + 0.5) / (df + 0.5))

            field_clauses = []  # (kind, occur, terms)
            for kind, occur, text in clauses:
                occur = "must" if occur == "should" and operator == "and" else occur
                if kind == "prefix":
                    p = text.lower()
                    expansion = {self.stem(p)} | {self.stem(w) for w in self.seen[f] if w.startswith(p)}
                    field_clauses.append(("prefix", occur, (p, expansion)))
                elif kind == "phrase":
                    t = self.tokens(text)
                    if t:
                        field_clauses.append(("phrase", occur, t))
                else:
                    field_clauses += [("phrase", occur, [t]) for t in self.tokens(text)]

            def score(c, t):
                kind, _, terms = c
                if kind == "prefix":
                    p, expansion = terms
                    return boost if any(u.startswith(p) or u in expansion for u in t) else None
                m = len(terms)
                freq = sum(1 for i in range(len(t) - m + 1) if t[i:i + m] == terms)
                if not freq:
                    return None
                return boost * sum(map(idf, terms)) * freq / (freq + K1 * (1 - B + B * len(t) / avgdl))

            must = [c for c in field_clauses if c[1] == "must"]
            should = [c for c in field_clauses if c[1] == "should"]
            for i, t in live.items():
                if any(score(c, t) is not None for c in field_clauses if c[1] == "must_not"):
                    excluded.add(i)
                if not must and not should:
                    continue
                got = [score(c, t) for c in must]
                opt = [s for s in (score(c, t) for c in should) if s is not None]
                if any(s is None for s in got) or (not must and not opt):
                    continue
                best[i] = max(best.get(i, 0.0), sum(got) + sum(opt))
        return {i: s for i, s in best.items() if i not in excluded}


def render(clauses) -> str:
    sign = {"should": "", "must": "+", "must_not": "-"}
    out = []
    for kind, occur, text in clauses:
        if kind == "phrase":
            out.append(f'{sign[occur]}"{text}"')
        elif kind == "prefix":
            out.append(f"{sign[occur]}{text}*")
        else:
            out.append(sign[occur] + text)
    return " ".join(out)


def random_query(rng, model) -> list:
    """3 to 4 clauses of every kind, phrases often cut from the documents so that they match."""
    texts = [t for d in model.docs.values() for t in (d.get("title"), d.get("description")) if t]
    clauses = []
    for _ in range(rng.integers(1, 5)):
        kind = rng.choice(["words", "words", "phrase", "phrase", "prefix", "junk"])
        occur = rng.choice(["should", "should", "must", "must_not"])
        if kind == "junk":  # not syntax: literal text
            clauses.append(("words", "should", str(rng.choice(["+", "-", "*", "a*", "x*", "**", "ph**"]))))
        elif kind == "words":
            clauses.append(("words", occur, str(rng.choice(WORDS + ["unknownword", "power-bank", "Phones"]))))
        elif kind == "prefix":
            w = str(rng.choice(WORDS + ["batteries", "runners"]))
            clauses.append(("prefix", occur, w[: rng.integers(2, len(w) + 1)]))
        else:
            words = (rng.choice(texts).split() if texts and rng.random() < 0.8 else list(rng.choice(WORDS, 3)))
            a = rng.integers(0, max(len(words) - 1, 1))
            clauses.append(("phrase", occur, " ".join(words[a:a + rng.integers(1, 4)])))
    if rng.random() < 0.1:
        clauses.append(("words", "should", '"unclosed'))
    return clauses


def check(da, model, clauses, k, rng, operator="or", exact=True):
    """`exact`: scores as the model's (else the hits are the model's matches, test_lexical.py)."""
    assert_ranked = assert_topk if exact else assert_hits_match
    text = render(clauses)
    ref = model.find(clauses, operator)
    res = da.find(text=text, limit=k, operator=operator)
    assert_ranked(res, ref, k)
    assert res.total == len(ref) == da.count(text=text, operator=operator), text
    # the same matching in every mode: filters, sort, facets
    flt = {"category": "a"}
    sub = {i: s for i, s in ref.items() if model.docs[i]["category"] == "a"}
    assert_ranked(da.find(text=text, limit=k, operator=operator, filter=flt), sub, k)
    ranked = da.find(text=text, operator=operator, sort=[("price", "desc")], limit=None)
    assert ranked.ids == sorted(ref, key=lambda i: -model.docs[i]["price"]), text
    assert da.facets("category", text=text, operator=operator) == sorted(
        Counter(model.docs[i]["category"] for i in ref).items(), key=lambda p: (-p[1], p[0]))
    # hybrid: the vector top-candidates and every match, BM25 + cosine
    q = rng.standard_normal(8)
    vec = {i: cosine(np.asarray(d["embedding"]), q) for i, d in model.docs.items()}
    vtop = sorted(vec, key=lambda i: -vec[i])[:5]
    fused = {i: ref.get(i, 0.0) + vec[i] for i in set(vtop) | set(ref)}
    assert_ranked(da.find(text=text, vector=q, candidates=5, exact=True, limit=k, operator=operator), fused, k)


@settings(max_examples=12, deadline=None, suppress_health_check=FIXTURES)
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(1, 12))
@pytest.mark.parametrize("storage", STORAGES)
def test_syntax_matches_the_model_through_writes(make_da, storage, seed, k):
    rng = np.random.default_rng(seed)
    schema, tokens = schema_and_tokens(storage)
    da = make_da(schema)
    model = Model(tokens)
    docs = random_docs(rng, 60)
    da.extend(docs)
    for d in docs:
        model.write(d)
    for step in range(3):
        for _ in range(4):
            check(da, model, random_query(rng, model), k, rng, str(rng.choice(["or", "and"])),
                  exact=step == 0 or storage not in REMOTE)
        ids = list(model.docs)
        gone = [str(i) for i in rng.choice(ids, 6, replace=False)]
        da.delete(gone)
        model.delete(gone)
        left = list(model.docs)
        title = " ".join(rng.choice(WORDS, 4))
        da.update(left[0], title=title)
        model.update(left[0], title=title)
        new = random_docs(rng, 70)[60 + step * 3: 63 + step * 3]
        da.extend(new)
        for d in new:
            model.write(d)
    da.close()


@pytest.mark.parametrize("storage", STORAGES)
def test_field_weights_scale_phrases_and_prefixes(make_da, storage):
    schema, tokens = schema_and_tokens(storage)
    da = make_da(schema)
    model = Model(tokens)
    docs = random_docs(np.random.default_rng(3), 50)
    da.extend(docs)
    for d in docs:
        model.write(d)
    rng = np.random.default_rng(4)
    for _ in range(15):
        clauses = random_query(rng, model)
        boosts = {"title": 2.5, "description": 0.5} if rng.random() < 0.5 else {"description": 1.5}
        ref = model.find(clauses, "or", boosts)
        res = da.find(text=render(clauses), text_fields=boosts, limit=10)
        assert_topk(res, ref, 10)
        assert da.count(text=render(clauses), text_fields=boosts) == len(ref)
    da.close()


def small(make_da, storage, docs):
    da = make_da(schema_and_tokens(storage)[0])
    da.extend([{"id": i, "embedding": np.ones(8), **d} for i, d in docs.items()])
    return da


@pytest.mark.parametrize("storage", STORAGES)
def test_a_phrase_or_required_terms_across_two_fields_do_not_match(make_da, storage):
    """Phrases and required terms apply within one field (as multi_match best_fields with
    operator "and"); an excluded term excludes the document whichever field holds it."""
    da = small(make_da, storage, {"a": {"title": "blue red", "description": "phone case"},
                                   "b": {"title": "cheap red phone", "description": "blue"},
                                   "c": {"title": "phone", "description": "red"}})
    assert da.find(text='"red phone"').ids == ["b"]
    assert da.find(text='"blue red phone"').ids == []
    assert set(da.find(text="+red +phone").ids) == {"b"}
    assert set(da.find(text="red phone", operator="and").ids) == {"b"}
    assert set(da.find(text="red -blue").ids) == {"c"}
    assert da.find(text="-red").ids == [] and da.count(text="-red") == 0   # nothing to score
    da.close()


@pytest.mark.parametrize("storage", STORAGES)
def test_prefixes_score_a_constant_and_find_words_through_their_terms(make_da, storage):
    da = small(make_da, storage, {"a": {"title": "batteries for running"}, "b": {"title": "pizza pizzas"},
                                  "c": {"title": "run", "description": "runner pizzeria"}})
    res = da.find(text="piz*")
    assert set(res.ids) == {"b", "c"} and list(res.scores) == [1.0, 1.0]   # constant, ties by slot
    # the prefix's own term, "batteri"; the engines do not stem, so there it is only a prefix
    assert set(da.find(text="battery*").ids) == (set() if storage in REMOTE else {"a"})
    assert set(da.find(text="batter*").ids) == {"a"}
    assert set(da.find(text="runn*").ids) == {"a", "c"}   # "running" and "runner" were indexed
    assert da.find(text="p*").ids == []                   # one leading character: the word "p"
    assert da.find(text="piz* piz*").scores[0] == 2.0      # a repeated clause counts twice
    assert set(da.find(text="pizza -piz*").ids) == set()
    da.close()


@pytest.fixture
def two_docs(make_da, storage):
    """A collection of two documents, made once per test: the examples only read it."""
    return small(make_da, storage, {"a": {"title": "red phone"}, "b": {"title": "ax"}})


@settings(max_examples=150, deadline=None, suppress_health_check=FIXTURES)
@given(text=st.text(max_size=30) | st.text(alphabet=' +-*"redphonax', max_size=25))
@pytest.mark.parametrize("storage", ["memory", "elasticsearch", "opensearch"])
def test_any_text_is_an_answer_never_an_error(two_docs, text):
    for operator in ("or", "and"):
        res = two_docs.find(text=text, operator=operator)
        assert res.total == two_docs.count(text=text, operator=operator) == len(res)
        assert np.isfinite(res.scores).all()


@pytest.mark.parametrize("path_storage", ["hnsw", "memory"])
def test_positions_survive_reopening_and_writes_after_it(path_storage, tmp_path):
    """Reopening maps the snapshot's positions instead of re-indexing; updates and deletes on the
    reopened collection copy what they change, and the next reopen sees them."""
    rng = np.random.default_rng(9)
    model = Model()
    path = tmp_path / "col"
    da = hs.DocumentArray(Product, storage=path_storage, path=path)
    docs = random_docs(rng, 80)
    da.extend(docs)
    for d in docs:
        model.write(d)
    queries = [random_query(rng, model) for _ in range(12)]
    for round_ in range(3):
        for clauses in queries:
            assert_topk(da.find(text=render(clauses), limit=10), model.find(clauses), 10)
        da.close()
        da = hs.DocumentArray(Product, storage=path_storage, path=path)
        for clauses in queries:
            assert_topk(da.find(text=render(clauses), limit=10), model.find(clauses), 10)
        ids = list(model.docs)
        gone = [str(i) for i in rng.choice(ids, 5, replace=False)]
        da.delete(gone)
        model.delete(gone)
        for i in rng.choice(list(model.docs), 4, replace=False):
            title = " ".join(rng.choice(WORDS, 5))
            da.update(str(i), title=title)
            model.update(str(i), title=title)
        new = random_docs(rng, 100)[80:84]
        new = [{**d, "id": f"{d['id']}n{round_}"} for d in new]
        da.extend(new)
        for d in new:
            model.write(d)
    da.close()


ANSWER_SYNTAX = ("memory", "memory-path", "hnsw", "hnsw-f32", "hnsw-path", "sqlite", "elasticsearch", "opensearch")


def test_storages_refuse_the_syntax_they_do_not_declare(make_da, storage):
    """Every storage answers plain words; the ones with the syntax (ANSWER_SYNTAX) answer it and
    operator="and", and one that does not raises UnsupportedError instead of running it as other
    words."""
    da = make_da(Product)
    da.extend([{"id": "a", "title": "red phone", "embedding": np.ones(8)}])
    try:
        assert da.find(text="red phone").ids == ["a"]
    except hs.UnsupportedError:  # no text search at all (hnswlib)
        return
    for kwargs in ({"text": '"red phone"'}, {"text": "+red"}, {"text": "ph*"}, {"text": "red", "operator": "and"}):
        try:
            assert da.find(**kwargs).ids == ["a"] and da.count(**kwargs) == 1
        except hs.UnsupportedError as e:
            assert storage not in ANSWER_SYNTAX, e
    # literal text is not syntax: every storage takes it
    assert da.find(text='red phone a* + - "').ids == ["a"]
    with pytest.raises(hs.ConfigError):
        da.find(text="red", operator="xor")
    with pytest.raises(hs.ConfigError):
        da.find(filter={}, operator="and")
