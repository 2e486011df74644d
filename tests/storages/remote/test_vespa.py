"""storage="vespa" without a Vespa engine (none can be installed here):

- the application package against pyvespa's own builders;
- the YQL of random filters, evaluated by a small YQL-subset interpreter written here,
  against the plain-Python filter model (tests/models.py), and hostile strings;
- the HTTP exchange against a local replay server on 127.0.0.1 answering with the
  request/response shapes of Vespa's /document/v1 and /search/ documentation, asserting
  the exact methods, paths, query parameters and JSON bodies sent.
"""
import json
import re
import threading
import unicodedata
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Optional

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import hybridsearch as hs
from hybridsearch.document import schema_of
from hybridsearch.query.filters import parse_filter
from hybridsearch.storages.remote.vespa import app as A
from hybridsearch.storages.remote.vespa.storage import doc_path
from hybridsearch.storages.remote.vespa.yql import YqlFilter, string_literal
from tests.contract.test_filters import doc_strategy, filters
from tests.models import FilterItem as Item
from tests.models import matches


class Product(hs.Document):
    title: hs.Text
    description: hs.Text = ""
    category: hs.Keyword
    price: int = 0
    rating: float = 0.0
    in_stock: bool = True
    embedding: hs.Vector[4]


# ------------------------------------------------------------ application package
@pytest.mark.parametrize("metric,distance,sim", [("cosine", "angular", "cos(distance(field, embedding))"),
                                                 ("ip", "dotproduct", "-distance(field, embedding)"),
                                                 ("l2", "euclidean", "-distance(field, embedding)")])
def test_schema_equals_pyvespas_rendering(metric, distance, sim):
    vp = pytest.importorskip("vespa.package", reason="pyvespa is in the [test] extra")
    ours = A.schema_sd(schema_of(Product), "product", metric, 16, 200)
    fast = ["fast-search"]
    kw = dict(indexing=["attribute", "summary"], attribute=fast)
    fields = [vp.Field(name="hs_id", type="string", **kw, match=["word", "cased"]),
              vp.Field(name="hs_seq", type="long", **kw),
              vp.Field(name="hs_present", type="array<string>", **kw),
              vp.Field(name="hs_extra", type="string", indexing=["summary"]),
              vp.Field(name="title", type="string", indexing=["index", "summary"], index="enable-bm25"),
              vp.Field(name="description", type="string", indexing=["index", "summary"], index="enable-bm25"),
              vp.Field(name="category", type="string", **kw, match=["word", "cased"]),
              vp.Field(name="price", type="long", **kw),
              vp.Field(name="rating", type="double", **kw),
              vp.Field(name="in_stock", type="bool", **kw),
              vp.Field(name="embedding", type="tensor<float>(x[4])", indexing=["attribute", "index", "summary"],
                       ann=vp.HNSW(distance_metric=distance, max_links_per_node=16,
                                   neighbors_to_explore_at_insert=200))]
    words = [vp.Field(name=f"hs_words_{t}", type="array<string>", is_document_field=False, attribute=fast,
                      indexing=[f"input {t}", "trim", 'split " +"', "attribute"]) for t in ("title", "description")]
    score = ("max(query(w_title) * (bm25(title) / 2.2 + matchCount(hs_words_title)), "
             "query(w_description) * (bm25(description) / 2.2 + matchCount(hs_words_description)))")
    text_score = [vp.Function(name="text_score", expression=score)]
    w = [("query(w_title)", "double", "1.0"), ("query(w_description)", "double", "1.0")]
    q = [("query(q)", "tensor<float>(x[4])")]
    theirs = vp.Schema(name="product", document=vp.Document(fields=fields),
                       fieldsets=[vp.FieldSet(name="default", fields=["title", "description"])],
                       rank_profiles=[vp.RankProfile(name="bm25", inputs=w, functions=text_score,
                                                     first_phase="text_score"),
                                      vp.RankProfile(name="closeness", inputs=q, first_phase=sim),
                                      vp.RankProfile(name="hybrid", inputs=q + w, functions=text_score,
                                                     first_phase=f"text_score + {sim}",
                                                     match_features=["text_score"])])
    for f in words:
        theirs.add_fields(f)
    assert ours.split() == theirs.schema_to_text.split()
    app = vp.ApplicationPackage(name="hybridsearch", schema=[theirs],
                                query_profile=vp.QueryProfile(fields=[vp.QueryField(name="maxHits", value=5000),
                                                                   vp.QueryField(name="maxOffset", value=2 ** 31 - 1)]))
    assert A.services_xml("product").split() == app.services_to_text.split()
    files = A.application_files(schema_of(Product), "product", metric, 16, 200, max_hits=5000)
    assert files["search/query-profiles/default.xml"].split() == app.query_profile_to_text.split()
    assert files["search/query-profiles/types/root.xml"].split() == app.query_profile_type_to_text.split()


def test_package_files_are_where_pyvespa_puts_them(tmp_path):
    vp = pytest.importorskip("vespa.package", reason="pyvespa is in the [test] extra")
    app = vp.ApplicationPackage(name="hybridsearch", schema=[vp.Schema(name="product", document=vp.Document())],
                                query_profile=vp.QueryProfile(fields=[vp.QueryField(name="maxHits", value=1)]))
    app.to_files(tmp_path)
    theirs = {str(f.relative_to(tmp_path)) for f in tmp_path.rglob("*") if f.is_file()}
    ours = set(A.application_files(schema_of(Product), "product", "cosine", 16, 200))
    assert ours <= theirs, ours - theirs


def test_application_package_files_and_zip(tmp_path):
    import zipfile

    from hybridsearch.storages.remote.vespa.storage import application_package
    files = application_package(Product, doctype="product")
    assert files == A.application_files(schema_of(Product), "product", "cosine", 16, 200)
    assert set(files) == {"schemas/product.sd", "services.xml", "search/query-profiles/default.xml",
                          "search/query-profiles/types/root.xml"}
    A.write_application(files, tmp_path / "app")
    assert (tmp_path / "app" / "schemas" / "product.sd").read_text() == files["schemas/product.sd"]
    A.write_application(files, str(tmp_path / "app.zip"))
    with zipfile.ZipFile(tmp_path / "app.zip") as z:
        assert sorted(z.namelist()) == sorted(files)
        assert all(z.read(n).decode() == files[n] for n in files)
    assert (tmp_path / "app" / "search" / "query-profiles" / "default.xml").read_text() == \
        files["search/query-profiles/default.xml"]
    with pytest.raises(hs.ConfigError, match="max_hits"):
        A.application_files(schema_of(Product), "product", "cosine", 16, 200, max_hits=0)


def test_names_vespa_would_refuse_are_config_errors():
    class Bad(hs.Document):
        select: int = 0
        v: hs.Vector[2]

    with pytest.raises(hs.ConfigError, match="select"):
        A.schema_sd(schema_of(Bad), "bad", "cosine", 16, 100)
    with pytest.raises(hs.ConfigError):
        A.schema_sd(schema_of(Product), "x; drop", "cosine", 16, 100)


# ------------------------------------------------------------------- YQL subset
# the lexer rules of Vespa's YQL grammar (container-search yqlplus.g4): STRING with its escape
# set, FLOAT, LONG_INT (suffix L) and INT, tried longest first as ANTLR does
_EXP = r"[eE][-+]?\d+"
_TOKEN = re.compile(r'\s*(?:(?P<str>"(?:[^"\\]|\\[btnfr"\'\\/]|\\u[0-9a-fA-F]{4})*")'
                    rf'|(?P<float>-?\d+\.\d*(?:{_EXP})?|-?\.\d+(?:{_EXP})?|-?\d+{_EXP})'
                    r'|(?P<long>-?\d+[lL])|(?P<int>-?\d+)'
                    r'|(?P<op><=|>=|=|<|>|!|\(|\))|(?P<word>[A-Za-z_][A-Za-z_0-9\-]*))')


def _tokens(text):
    pos, out = 0, []
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        assert m and m.end() > pos, f"cannot tokenise {text[pos:]!r}"
        pos = m.end()
        kind = m.lastgroup
        val = m.group(kind)
        if kind == "str":
            val = json.loads(val)  # the escapes we write are also JSON's: \" \\ \\uXXXX
        elif kind == "float":
            val, kind = float(val), "num"
        elif kind == "int":
            # Vespa converts INT with Integer.valueOf: beyond 32 bits the query is refused
            assert -2 ** 31 <= int(val) < 2 ** 31, f"INT literal {val} overflows Integer.valueOf"
            val, kind = int(val), "num"
        elif kind == "long":
            assert -2 ** 63 <= int(val[:-1]) < 2 ** 63, f"LONG_INT literal {val} overflows Long.parseLong"
            val, kind = int(val[:-1]), "num"
        out.append((kind, val))
    return out


class YqlEval:
    """Evaluates the YQL condition subset the compiler writes (or, and, !, (), true/false,
    `f contains "s"`, `f <op> number`, `f = true`) on a document dict."""

    def __init__(self, text):
        self.t, self.i = _tokens(text), 0

    def peek(self):
        return self.t[self.i] if self.i < len(self.t) else (None, None)

    def take(self):
        self.i += 1
        return self.t[self.i - 1]

    def parse(self):
        node = self.disj()
        assert self.i == len(self.t), "trailing tokens"
        return node

    def chain(self, word, operand, combine):
        """operand (word operand)*, e.g. a disjunction of conjunctions."""
        parts = [operand()]
        while self.peek() == ("word", word):
            self.take()
            parts.append(operand())
        return lambda d: combine(p(d) for p in parts)

    def disj(self):
        return self.chain("or", self.conj, any)

    def conj(self):
        return self.chain("and", self.unary, all)

    def unary(self):
        kind, val = self.take()
        if (kind, val) == ("op", "!"):
            inner = self.unary()
            return lambda d: not inner(d)
        if (kind, val) == ("op", "("):
            inner = self.disj()
            assert self.take() == ("op", ")")
            return inner
        if kind == "word" and val in ("true", "false"):
            return lambda d, v=(val == "true"): v
        field = val
        kind, op = self.take()
        kind2, arg = self.take()
        if op == "contains":
            def contains(d):
                v = d.get(field)
                return arg in v if isinstance(v, list) else v == arg
            return contains
        if kind2 == "word":
            arg = arg == "true"
        cmp = {"=": lambda a, b: a == b, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
               ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}[op]
        return lambda d: d.get(field) is not None and cmp(d[field], arg)


S = schema_of(Item)  # every kind a filter can name (tests/models.py FilterItem)


def _as_vespa(doc: dict) -> dict:
    """A stored document as the YQL sees it: hs_id, hs_present, attributes."""
    out = {k: v for k, v in doc.items() if v is not None}
    out["hs_id"] = doc["id"]
    out["hs_present"] = [n for n, s in S.fields.items() if s.optional and doc.get(n) is not None]
    return out


@given(docs=st.lists(doc_strategy, min_size=1, max_size=15), flt=filters)
@settings(max_examples=300, deadline=None)
def test_yql_means_what_the_filter_means(docs, flt):
    rows = [Item(**dict(d, id=f"d{i}", vec=[1.0, 0.0])).model_dump() for i, d in enumerate(docs)]
    node = parse_filter(flt, S)
    try:
        yql = YqlFilter(S).compile(node)
    except hs.UnsupportedError as e:
        assert "string field" in str(e)  # a range on a keyword: YQL cannot say it
        return
    pred = YqlEval(yql).parse()
    assert [r["id"] for r in rows if pred(_as_vespa(r))] == [r["id"] for r in rows if matches(r, flt)], yql


_BIG = [0, 7, 2 ** 31 - 1, 2 ** 31, -2 ** 31, -2 ** 31 - 1, 2 ** 40, 2 ** 63 - 1, -2 ** 63]
_BIG_ARGS = _BIG + [2 ** 63, -2 ** 63 - 1, 10 ** 20, -10 ** 20, 2.5, 3e9, 1e300, -1e300, float("inf"), -float("inf")]
_big_leaf = st.one_of(
    st.builds(lambda f, op, v: {f: {op: v}}, st.sampled_from(["price", "discount", "rating"]),
              st.sampled_from(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte"]), st.sampled_from(_BIG_ARGS)),
    st.builds(lambda f, op, vs: {f: {op: vs}}, st.sampled_from(["price", "rating"]), st.sampled_from(["$in", "$nin"]),
              st.lists(st.sampled_from(_BIG_ARGS), max_size=3)))
_big_filters = st.recursive(_big_leaf, lambda c: st.one_of(
    st.builds(lambda fs: {"$and": fs}, st.lists(c, min_size=1, max_size=3)),
    st.builds(lambda fs: {"$or": fs}, st.lists(c, min_size=1, max_size=3)),
    st.builds(lambda f: {"$not": f}, c)), max_leaves=4)
_big_doc = st.fixed_dictionaries({"category": st.just("c"), "price": st.sampled_from(_BIG),
                                  "discount": st.one_of(st.none(), st.sampled_from(_BIG)),
                                  "rating": st.sampled_from([float(b) for b in _BIG] + [2.5, -1e300])})


def _as_documented(flt, field=None):
    """The filter as docs/filters.md defines it: on a float field, an int beyond the 64-bit range
    stands for the nearest float (the plain-Python model would compare it exactly)."""
    if isinstance(flt, dict):
        return {k: _as_documented(v, field if k.startswith("$") else k) for k, v in flt.items()}
    if isinstance(flt, list):
        return [_as_documented(v, field) for v in flt]
    if field == "rating" and type(flt) is int and not -2 ** 63 <= flt <= 2 ** 63 - 1:
        return float(flt)
    return flt


@given(docs=st.lists(_big_doc, min_size=1, max_size=10), flt=_big_filters)
@settings(max_examples=200, deadline=None)
def test_yql_numbers_are_literals_vespa_reads_and_mean_the_filter(docs, flt):
    # 64-bit attribute values and arguments around the 32/64-bit edges: the literals must be
    # ones Vespa's parser converts (INT within 32 bits, LONG_INT within 64) and still select
    # what the filter model does
    rows = [Item(**dict(d, id=f"d{i}", vec=[1.0, 0.0])).model_dump() for i, d in enumerate(docs)]
    yql = YqlFilter(S).compile(parse_filter(flt, S))
    pred = YqlEval(yql).parse()
    expected = [r["id"] for r in rows if matches(r, _as_documented(flt))]
    assert [r["id"] for r in rows if pred(_as_vespa(r))] == expected, yql


def test_long_literals_carry_the_suffix():
    c = YqlFilter(S).compile
    assert c(parse_filter({"price": {"$gt": 2 ** 31 - 1}}, S)) == "price > 2147483647"
    assert c(parse_filter({"price": {"$gt": 2 ** 31}}, S)) == "price > 2147483648L"
    assert c(parse_filter({"price": {"$lt": -2 ** 63}}, S)) == "price < -9223372036854775808L"
    assert c(parse_filter({"price": {"$lt": 2 ** 63}}, S)) == "true"  # every long is below
    assert c(parse_filter({"rating": {"$lt": 10 ** 20}}, S)) == "rating < 1e+20"  # 1e20 is exact
    # arguments the attribute cannot hold are moved onto values it can, never rounded by Vespa
    assert c(parse_filter({"price": {"$gt": 2.5}}, S)) == "price >= 3"
    assert c(parse_filter({"price": {"$lte": -2.5}}, S)) == "price <= -3"
    assert c(parse_filter({"price": 2.5}, S)) == "false"
    assert c(parse_filter({"rating": {"$lt": 2 ** 63 - 1}}, S)) == "rating < 9.223372036854776e+18"
    assert c(parse_filter({"rating": {"$gt": 2 ** 63 - 1}}, S)) == "rating >= 9.223372036854776e+18"


@pytest.mark.parametrize("hostile", ['") or true or ("', 'a"b', "back\\slash", "new\nline", "x' OR 1=1 --", "\u2028"])
def test_hostile_strings_stay_data(hostile):
    yql = YqlFilter(S).compile(parse_filter({"category": hostile}, S))
    tokens = _tokens(yql)
    assert tokens == [("word", "category"), ("word", "contains"), ("str", hostile)]
    assert string_literal(hostile).count('"') - string_literal(hostile).count('\\"') == 2


def test_query_terms_equal_pyvespas_querybuilder():
    # pyvespa's builder does not escape strings, so only benign values are compared here;
    # hostile strings are covered by the tokeniser tests above
    qb = pytest.importorskip("vespa.querybuilder", reason="pyvespa is in the [test] extra")
    from hybridsearch.storages.remote.vespa.lexical import condition
    from hybridsearch.storages.remote.vespa.yql import nearest_neighbor, range_buckets, range_grouping, select
    from hybridsearch.storages.remote.vespa.yql import value_grouping

    def same(ours, theirs):
        theirs = theirs.build() if hasattr(theirs, "build") and not hasattr(theirs, "from_") else str(theirs)
        assert re.sub(r"\s+", "", ours) == re.sub(r"\s+", "", theirs), (ours, theirs)

    nn = qb.nearestNeighbor("embedding", "q", {"targetHits": 10, "hnsw.exploreAdditionalHits": 90})
    same(nearest_neighbor("embedding", 10, 100), nn)
    f = qb.QueryField
    cond = YqlFilter(S).compile(parse_filter({"category": "Books", "price": {"$gte": 3}, "rating": {"$lt": 2.5}}, S))
    theirs = f("category").contains("Books") & (f("price") >= 3) & (f("rating") < 2.5)
    # our compiler parenthesises every and/or group; pyvespa leaves the top one bare
    same(select("item", cond), qb.select("*").from_("item").where(type(theirs)(f"({theirs.build()})")))
    same(select("item", YqlFilter(S).compile(parse_filter({"in_stock": True}, S)), order_by_seq=True),
         qb.select("*").from_("item").where(f("in_stock") == qb.QueryField("true")).order_by("hs_seq", ascending=True))
    # text terms (pyvespa writes annotations with quoted keys; Vespa's parser takes both)
    unquote = lambda c: re.sub(r'"(targetHits)"', r"\1", c.build())
    same(condition("nokia 3310", ["title"], grammar="weakAnd"),
         unquote(qb.weakAnd(f("title").contains("nokia"), f("title").contains("3310"),
                            annotations={"targetHits": 100})))
    same(condition('"new york"', ["title"]), f("title").contains(qb.phrase("new", "york")))
    same(condition("piz*", ["title"]), f("hs_words_title").contains("piz", annotations={"prefix": True}))
    same(condition("+pizza york", ["title"]), qb.rank(f("title").contains("pizza"), f("title").contains("york")))
    # grouping
    G = qb.Grouping
    same(value_grouping("category", 11), G.all(G.group("category"), G.max(11), G.order(-G.count()),
                                               G.each(G.output(G.count()))))
    buckets = range_buckets(S.fields["price"].kind, [(0, 100), (500, None)])
    same(range_grouping("price", buckets), G.all(*[
        G.all(G.group(G.predefined("price", [b])), G.as_(G.each(G.output(G.count())), label))
        for label, b in [("r0", "bucket(0,100)"), ("r1", "bucket(500,inf)")]]))


# -------------------------------------------------------------- HTTP exchange
class Replay:
    """A local HTTP server that records each request and answers from a queue of
    (status, json) responses shaped like Vespa's documented ones."""

    def __init__(self):
        self.requests, self.responses, self.headers = [], [], []
        replay = self

        class Handler(BaseHTTPRequestHandler):
            def _handle(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(n)) if n else None
                replay.requests.append((self.command, self.path, body))
                replay.headers.append(dict(self.headers))
                status, data = replay.responses.pop(0) if replay.responses else (500, {"message": "no response queued"})
                raw = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            do_GET = do_POST = do_PUT = do_DELETE = _handle

            def log_message(self, *a):
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def queue(self, *responses):
        self.responses.extend(responses)

    def close(self):
        self.server.shutdown()


def _search_response(children, total=None):
    """The shape of a /search/ JSON result (root.fields.totalCount, root.children[].relevance/fields)."""
    return {"root": {"id": "toplevel", "relevance": 1.0,
                     "fields": {"totalCount": total if total is not None else len(children)},
                     "coverage": {"coverage": 100, "documents": len(children), "full": True, "nodes": 1,
                                  "results": 1, "resultsFull": 1},
                     "children": children}}


def _hit(doc_id, relevance, fields):
    return {"id": f"id:hybridsearch:product::{doc_id}", "relevance": relevance, "source": "hybridsearch_content",
            "fields": {"sddocname": "product", "documentid": f"id:hybridsearch:product::{doc_id}", **fields}}


def _fields(i, seq, v, **kw):
    f = {"hs_id": i, "hs_seq": seq, "hs_present": [], "title": f"t{i}", "description": "", "category": "c",
         "price": 1, "rating": 0.0, "in_stock": True, "embedding": {"type": "tensor<float>(x[4])", "values": v}}
    f.update(kw)
    return f


@pytest.fixture
def server():
    s = Replay()
    yield s
    s.close()


def open_da(server, **kw):
    server.queue((200, _search_response([], 0)))  # the insertion-sequence probe on open
    da = hs.DocumentArray(Product, storage="vespa", url=server.url, doctype="product", **kw)
    method, path, body = server.requests.pop(0)
    assert (method, path) == ("POST", "/search/")
    assert body["yql"] == "select hs_seq from product where true order by hs_seq desc limit 1"
    return da


def test_extend_puts_each_document_through_document_v1(server):
    da = open_da(server)
    not_found = {"pathId": "/document/v1/hybridsearch/product/docid/a", "id": "id:hybridsearch:product::a"}
    put_ok = {"pathId": "/document/v1/hybridsearch/product/docid/a", "id": "id:hybridsearch:product::a"}
    server.queue((404, not_found), (200, put_ok))
    da.extend([{"id": "a", "title": "Nokia", "category": "Phones", "price": 59, "embedding": [1, 2, 3, 4]}])
    (m1, p1, b1), (m2, p2, b2) = server.requests
    assert (m1, p1, b1) == ("GET", "/document/v1/hybridsearch/product/docid/a", None)
    assert (m2, p2) == ("POST", "/document/v1/hybridsearch/product/docid/a")
    assert b2 == {"fields": {"hs_id": "a", "hs_seq": 1, "hs_present": [], "title": "Nokia", "description": "",
                             "category": "Phones", "price": 59, "rating": 0.0, "in_stock": True,
                             "embedding": {"values": [1.0, 2.0, 3.0, 4.0]}}}


@pytest.mark.parametrize("hostile,encoded", [("../_all", "..%2F_all"), ("a/b", "a%2Fb"), ("?x=1", "%3Fx%3D1"),
                                             ('q"uote', "q%22uote"), ("..", "%2E%2E"), ("sp ace", "sp%20ace")])
def test_ids_are_one_percent_encoded_path_segment(server, hostile, encoded):
    assert doc_path("hybridsearch", "product", hostile) == "/document/v1/hybridsearch/product/docid/" + \
        encoded.replace(".", "%2E")
    da = open_da(server)
    server.queue((200, {"pathId": "x", "id": "y", "fields": _fields(hostile, 7, [1, 0, 0, 0])}),
                 (200, {"pathId": "x", "id": "y"}))
    da.update(hostile, price=1269)
    (m1, p1, _), (m2, p2, b2) = server.requests
    assert m1 == "GET" and m2 == "PUT" and p1 == p2 == "/document/v1/hybridsearch/product/docid/" + \
        encoded.replace(".", "%2E")
    assert b2 == {"fields": {"price": {"assign": 1269}, "hs_present": {"assign": []}}}


def test_update_of_a_missing_id_is_a_key_error(server):
    da = open_da(server)
    server.queue((404, {"pathId": "/document/v1/hybridsearch/product/docid/zz", "id": "id:hybridsearch:product::zz"}))
    with pytest.raises(KeyError):
        da.update("zz", price=1)
    assert [r[0] for r in server.requests] == ["GET"]


def test_vector_search_yql_and_scores(server):
    da = open_da(server)
    q = np.array([1.0, 0.0, 0.0, 0.0], dtype=np.float32)
    server.queue((200, _search_response([_hit("a", 0.9, _fields("a", 1, [1, 1, 0, 0])),
                                         _hit("b", 0.5, _fields("b", 2, [0, 1, 0, 0]))])))
    res = da.find(vector=q, filter={"category": 'x") or true or ("', "price": {"$lt": 100}}, limit=2, ef=50)
    method, path, body = server.requests[0]
    assert (method, path) == ("POST", "/search/")
    assert body["yql"] == ('select * from product where ({targetHits: 2, hnsw.exploreAdditionalHits: 48}'
                           'nearestNeighbor(embedding, q)) and (category contains "x\\") or true or (\\"" and price < 100)')
    assert body["ranking"] == "closeness" and body["input.query(q)"] == [1.0, 0.0, 0.0, 0.0] and body["hits"] == 2
    assert res.ids == ["a", "b"]
    np.testing.assert_allclose(res.scores, [1 / np.sqrt(2), 0.0], atol=1e-6)  # cosine from the vectors


def test_text_and_hybrid_queries(server):
    da = open_da(server)
    server.queue((200, _search_response([_hit("a", 7.5, _fields("a", 1, [1, 0, 0, 0]))])))
    res = da.find(text='nokia 3310"', limit=5)  # a quote inside a clause is literal text, no phrase
    text = ('select * from product where ({targetHits: 100}weakAnd(title contains "nokia", title contains "3310", '
            'description contains "nokia", description contains "3310"))')
    body = server.requests[-1][2]
    assert body == {"yql": text, "hits": 5, "ranking": "bm25", "timeout": "30.0s"}
    assert res.ids == ["a"] and res.scores.tolist() == [7.5]
    # res.total, when read: the same terms asking no hits, as an OR (weakAnd prunes to its
    # targetHits, and a total counts every document holding a term)
    server.queue((200, _search_response([], 12)))
    assert res.total == 12
    assert server.requests[-1][2] == {"yql": 'select * from product where (title contains "nokia" or title contains '
                                             '"3310" or description contains "nokia" or description contains "3310")',
                                      "hits": 0, "timeout": "30.0s"}
    server.queue((200, _search_response([], 3)))
    assert da.count(text="nokia", filter={"in_stock": True}) == 3
    assert server.requests[-1][2]["yql"] == ('select * from product where (title contains "nokia" or description '
                                             'contains "nokia") and in_stock = true')
    # the hybrid profile's answer: each hit with its text_score match feature (the profile declares it)
    server.queue((200, _search_response([_hit("a", 8.1, dict(_fields("a", 1, [1, 0, 0, 0]),
                                                            matchfeatures={"text_score": 7.1}))])))
    res = da.find(text="nokia", vector=[1, 0, 0, 0], limit=3, candidates=20)
    np.testing.assert_allclose(res.scores, [8.1], rtol=1e-6)  # text_score + cosine, fused by the executor
    np.testing.assert_allclose(res.part_scores["text"], [7.1], rtol=1e-6)
    np.testing.assert_allclose(res.part_scores["vector"], [1.0], rtol=1e-6)
    body = server.requests[-1][2]
    assert body["ranking"] == "hybrid" and body["hits"] == 3 and "userq" not in body
    assert body["yql"] == ('select * from product where (({targetHits: 20, hnsw.exploreAdditionalHits: 80}'
                           'nearestNeighbor(embedding, q)) or ({targetHits: 100}weakAnd(title contains "nokia", '
                           'description contains "nokia")))')


def test_filter_only_pages_in_insertion_order(server):
    da = open_da(server)
    server.queue((200, _search_response([_hit(f"d{i}", 0.0, _fields(f"d{i}", i, [1, 0, 0, 0])) for i in (3, 9)])))
    res = da.find(filter={"in_stock": True}, limit=2)
    assert res.ids == ["d3", "d9"]
    body = server.requests[-1][2]
    assert body["yql"] == "select * from product where in_stock = true order by hs_seq asc" and body["hits"] == 2
    server.queue((200, _search_response([], 7)))  # res.total, when read: the filter asking no hits
    assert res.total == 7
    assert server.requests[-1][2] == {"yql": "select * from product where in_stock = true", "hits": 0,
                                      "timeout": "30.0s"}
    # partial coverage: not reported; the matches are counted by listing them
    degraded = _search_response([], 5)
    degraded["root"]["coverage"].update(coverage=50, full=False, degraded={"timeout": True})
    server.queue((200, degraded), (200, _search_response([_hit("d3", 0.0, _fields("d3", 3, [1, 0, 0, 0]))])))
    assert da.count(filter={"in_stock": True}) == 1


def test_errors_are_backend_errors_with_status_and_no_token(server):
    da = open_da(server, token="tok-secret-123", max_retries=1, retry_backoff=0.0)
    server.queue((400, {"root": {"errors": [{"code": 4, "summary": "Invalid query parameter",
                                             "message": "Could not parse query"}]}}))
    with pytest.raises(hs.BackendError, match=r"status 400.*Invalid query parameter") as err:
        da.find(vector=[1, 0, 0, 0])
    assert "tok-secret-123" not in str(err.value)
    assert server.headers[-1]["Authorization"] == "Bearer tok-secret-123"
    server.queue((200, _search_response([], 0)), (200, _search_response([], 0)))  # len() for repr and stats
    stats = da.stats()
    assert "tok-secret-123" not in repr(da) and "tok-secret-123" not in str(stats) and "token" not in stats
    server.queue((503, {"message": "busy"}), (200, _search_response([], 0)))
    assert da.find(vector=[1, 0, 0, 0]).ids == []  # one retry after 503
    server.queue((507, {"pathId": "/document/v1/hybridsearch/product/docid/a", "message": "Disk full"}))
    with pytest.raises(hs.BackendError, match="status 507.*Disk full"):
        da.update("a", price=1)


def test_a_failed_put_rolls_back_the_batch(server):
    da = open_da(server)
    server.queue((404, {}), (200, {}),                                   # a: new, written
                 (200, {"fields": _fields("b", 5, [0, 1, 0, 0])}),        # b: existing
                 (507, {"message": "Disk full"}),                         # b: put fails
                 (200, {}))                                               # rollback: delete a
    with pytest.raises(hs.BackendError, match="Disk full.*rolled back"):
        da.extend([{"id": "a", "title": "x", "category": "c", "embedding": [1, 0, 0, 0]},
                   {"id": "b", "title": "y", "category": "c", "embedding": [0, 1, 0, 0]}])
    assert server.requests[-1][:2] == ("DELETE", "/document/v1/hybridsearch/product/docid/a")


def test_unreachable_server_is_a_backend_error():
    with pytest.raises(hs.BackendError, match="no response"):
        hs.DocumentArray(Product, storage="vespa", url="http://127.0.0.1:1", max_retries=0)


def _visit_response(docs, continuation=None):
    """The shape of a /document/v1 visit chunk (documents, documentCount, continuation)."""
    out = {"pathId": "/document/v1/hybridsearch/product/docid",
           "documents": [{"id": f"id:hybridsearch:product::{i}", "fields": {"hs_id": i, "hs_seq": seq}}
                         for i, seq in docs],
           "documentCount": len(docs)}
    if continuation:
        out["continuation"] = continuation
    return out


def test_iteration_visits_in_chunks_and_sorts_by_insertion(server):
    from urllib.parse import parse_qs, urlsplit
    da = open_da(server)
    # chunks in bucket order, one empty chunk in between (a visit may return none and go on)
    server.queue((200, _visit_response([("c", 3), ("a", 1)], "AAAAEAAA")),
                 (200, _visit_response([], "AAAAEBBB")),
                 (200, _visit_response([("../_all", 2)])),
                 *[(200, {"fields": _fields(i, seq, [1, 0, 0, 0])}) for i, seq in (("a", 1), ("../_all", 2), ("c", 3))])
    assert [d.id for d in da] == ["a", "../_all", "c"]
    assert [r[:2] for r in server.requests[3:]] == [("GET", doc_path("hybridsearch", "product", i))
                                                    for i in ("a", "../_all", "c")]
    queries = []
    for method, path, body in server.requests[:3]:
        assert method == "GET"
        url = urlsplit(path)
        assert url.path == "/document/v1/hybridsearch/product/docid" and body is None
        queries.append({k: v[0] for k, v in parse_qs(url.query).items()})
    assert queries[0] == {"wantedDocumentCount": "400", "fieldSet": "product:hs_id,hs_seq", "timeout": "30.0s"}
    assert queries[1] == dict(queries[0], continuation="AAAAEAAA")
    assert queries[2] == dict(queries[0], continuation="AAAAEBBB")


def test_iteration_refuses_documents_another_writer_put(server):
    da = open_da(server)
    server.queue((200, {"documents": [{"id": "id:hybridsearch:product::x", "fields": {"title": "t"}}],
                        "documentCount": 1}))
    with pytest.raises(hs.BackendError, match="not written by hybridsearch"):
        [d.id for d in da]  # (list(da) would ask len(da) first)


def test_count_is_total_count_when_coverage_is_full_else_a_visit(server):
    da = open_da(server, cluster="hybridsearch_content")
    server.queue((200, _search_response([], 42)))
    assert len(da) == 42
    method, path, body = server.requests.pop()
    assert (method, path) == ("POST", "/search/")
    assert body == {"yql": "select * from product where true", "hits": 0, "timeout": "30.0s"}
    degraded = _search_response([], 40)
    degraded["root"]["coverage"].update(coverage=50, full=False, degraded={"timeout": True})
    server.queue((200, degraded), (200, _visit_response([("a", 1), ("b", 2)], "C1")),
                 (200, _visit_response([("c", 3)])))
    assert len(da) == 3  # the partial 40 is not reported
    assert "fieldSet=%5Bid%5D" in server.requests[1][1] and "cluster=hybridsearch_content" in server.requests[1][1]


def test_more_hits_than_max_hits_is_unsupported_before_any_request(server):
    da = open_da(server, max_hits=50)
    with pytest.raises(hs.UnsupportedError, match="max_hits=50"):
        da.find(vector=[1, 0, 0, 0], limit=51)
    with pytest.raises(hs.UnsupportedError, match="max_hits=50"):
        da.find(text="nokia", vector=[1, 0, 0, 0], limit=5, candidates=60, fusion="rrf")
    assert server.requests == []
    # the package of the open collection, made again from what its stats say
    from hybridsearch.storages.remote.vespa.storage import application_package
    server.queue((200, _search_response([], 0)))  # len() for stats
    stats = da.stats()
    files = application_package(Product, **{k: stats[k] for k in ("doctype", "metric", "m", "ef_construct",
                                                                   "max_hits")})
    assert files["search/query-profiles/default.xml"].count("50") == 1


def test_vespa_refusing_too_many_hits_is_a_backend_error(server):
    # a package deployed without our query profile: Vespa's documented answer to hits > 400
    da = open_da(server)
    server.queue((400, {"root": {"id": "toplevel", "relevance": 1.0, "fields": {"totalCount": 0},
                                 "errors": [{"code": 3, "summary": "Illegal query",
                                             "message": "401 hits requested, configured limit: 400."}]}}))
    with pytest.raises(hs.BackendError, match="status 400.*Illegal query: 401 hits requested"):
        da.find(vector=[1, 0, 0, 0], limit=401)


def test_credentials_in_the_url_become_basic_auth_and_are_never_shown(server):
    import base64
    url = server.url.replace("http://", "http://reader:s%3Ecret-pw@")
    server.queue((200, _search_response([], 0)))
    da = hs.DocumentArray(Product, storage="vespa", url=url, doctype="product", max_retries=0)
    server.queue((200, _search_response([], 0)), (200, _search_response([], 0)))  # len() for repr and stats
    stats = da.stats()
    shown = repr(da) + str(stats)
    assert "s>cret-pw" not in shown and "s%3Ecret-pw" not in shown and "reader" not in shown
    assert stats["url"] == server.url and stats["doctype"] == "product"
    server.queue((500, {"message": "internal error for reader:s>cret-pw"}))
    with pytest.raises(hs.BackendError) as err:
        da.find(vector=[1, 0, 0, 0])
    assert "s>cret-pw" not in str(err.value) and "status 500" in str(err.value)
    assert server.headers[-1]["Authorization"] == "Basic " + base64.b64encode(b"reader:s>cret-pw").decode()


# -------------------------------------------------- API.md sections 7 and 8
class Shelf(hs.Document):
    """Optional fields of every kind a sort, facet or update treats apart."""

    title: hs.Text
    category: hs.Keyword
    brand: Optional[hs.Keyword] = None
    discount: Optional[int] = None
    on_sale: Optional[bool] = None
    notes: dict = {}
    embedding: hs.Vector[4]


def open_shelf(server, **kw):
    server.queue((200, _search_response([], 0)))
    da = hs.DocumentArray(Shelf, storage="vespa", url=server.url, doctype="shelf", **kw)
    server.requests.pop(0)
    return da


def _query(path):
    from urllib.parse import parse_qs, urlsplit
    url = urlsplit(path)
    return url.path, {k: v[0] for k, v in parse_qs(url.query).items()}


def test_sorted_find_is_one_sorted_query_with_its_total(server):
    da = open_da(server)
    server.queue((200, _search_response([_hit("d2", 0.0, _fields("d2", 2, [1, 0, 0, 0], price=3)),
                                         _hit("d7", 0.0, _fields("d7", 7, [1, 0, 0, 0], price=5))], 9)))
    res = da.find(filter={"category": "c"}, sort=[("price", "asc"), ("rating", "desc")], limit=1, offset=1)
    assert server.requests[-1][2] == {"yql": 'select * from product where category contains "c"', "hits": 2,
                                      "ranking": "unranked", "sorting": "+price -rating +hs_seq",
                                      "sorting.degrading": False, "timeout": "30.0s"}
    assert res.ids == ["d7"] and res.total == 9 and len(server.requests) == 1  # the total came with the hits
    # with text: ties by BM25 then insertion; hit scores are the BM25 (relevance); the id as raw bytes
    server.queue((200, _search_response([_hit("b", 2.5, _fields("b", 4, [1, 0, 0, 0])),
                                         _hit("a", 7.0, _fields("a", 1, [1, 0, 0, 0]))], 2)))
    res = da.find(text="usb", sort=[("id", "desc")], limit=5)
    body = server.requests[-1][2]
    assert body["sorting"] == "-raw(hs_id) -[relevance] +hs_seq" and body["ranking"] == "bm25"
    assert body["yql"] == 'select * from product where (title contains "usb" or description contains "usb")'
    assert res.ids == ["b", "a"] and res.scores.tolist() == [2.5, 7.0] and res.total == 2


def test_a_sorted_find_longer_than_max_hits_pages_with_offset(server):
    da = open_da(server, max_hits=2)
    def page(*ids):
        return 200, _search_response([_hit(i, 0.0, _fields(i, "abcde".index(i) + 1, [1, 0, 0, 0])) for i in ids], 5)

    server.queue(page("a", "b"), page("c", "d"), page("e"))
    res = da.find(filter={"in_stock": True}, sort=[("price", "desc")], limit=None)
    assert res.ids == ["a", "b", "c", "d", "e"] and res.total == 5
    pages = [(b["hits"], b.get("offset")) for _, _, b in server.requests]
    assert pages == [(2, None), (2, 2), (2, 4)]


def test_missing_values_sort_last_or_take_the_generic_path(server):
    da = open_shelf(server)
    server.queue((200, _search_response([], 0)))
    da.find(filter={"category": "c"}, sort=[("discount", "asc")])
    assert server.requests[-1][2]["sorting"] == "+missing(discount,last) +hs_seq"
    # an optional keyword ("" is Vespa's missing string) or bool (one bit): the generic sort,
    # which lists the matches in insertion order and visits the ids
    server.queue((200, _search_response([], 0)), (200, _visit_response([])))
    assert da.find(filter={"category": "c"}, sort=[("brand", "asc")]).ids == []
    (_, _, listing), (method, path, _) = server.requests[-2:]
    assert "sorting" not in listing and listing["yql"].endswith("order by hs_seq asc")
    assert method == "GET" and path.startswith("/document/v1/hybridsearch/shelf/docid?")


def test_sort_specs():
    from hybridsearch.storages.remote.vespa.yql import sort_spec
    shelf, product = schema_of(Shelf), schema_of(Product)
    assert sort_spec(product, [("category", "asc"), ("in_stock", "desc")], False) == \
        "+raw(category) -in_stock +hs_seq"
    assert sort_spec(shelf, [("discount", "desc"), ("id", "asc")], True) == \
        "-missing(discount,last) +raw(hs_id) -[relevance] +hs_seq"
    assert sort_spec(shelf, [("on_sale", "asc")], False) is None
    assert sort_spec(shelf, [("discount", "asc"), ("brand", "asc")], False) is None


def _grouping_response(lists, total=10, full=True):
    """The shape of a grouping answer: root -> group:root:0 -> one grouplist per grouping
    (its label) -> groups with their value (or bucket limits) and count()."""
    out = _search_response([], total)
    out["root"]["coverage"]["full"] = full
    out["root"]["children"] = [{"id": "group:root:0", "relevance": 1.0, "continuation": {"this": ""},
                                "children": [{"id": f"grouplist:{label}", "relevance": 1.0, "label": label,
                                              "children": groups} for label, groups in lists.items()]}]
    return out


def _group(kind, value, count):
    return {"id": f"group:{kind}:{value}", "relevance": 1.0, "value": str(value), "fields": {"count()": count}}


def _bucket(lo, hi, count):
    return {"id": f"group:long_bucket:{lo}:{hi}", "relevance": 1.0, "limits": {"from": str(lo), "to": str(hi)},
            "fields": {"count()": count}}


def test_facets_are_one_grouping_query(server):
    da = open_da(server)
    server.queue((200, _grouping_response({"category": [_group("string", "Books", 5), _group("string", "Toys", 3),
                                                        _group("string", "Games", 2)]})))
    assert da.facets("category", filter={"in_stock": True}, limit=2) == [("Books", 5), ("Toys", 3)]
    assert server.requests[-1][2] == {
        "yql": "select * from product where in_stock = true | "
               "all(group(category) max(3) order(-count()) each(output(count())))",
        "hits": 0, "timeout": "30.0s"}
    server.queue((200, _grouping_response({"price": [_group("long", 12, 4), _group("long", -3, 1)]})))
    assert da.facets("price", text="usb", limit=5) == [(12, 4), (-3, 1)]
    assert server.requests[-1][2]["yql"] == (
        'select * from product where (title contains "usb" or description contains "usb") '
        "| all(group(price) max(6) order(-count()) each(output(count())))")


def test_facet_ties_at_the_cut_are_asked_again_and_broken_by_value(server):
    da = open_da(server)
    server.queue((200, _grouping_response({"category": [_group("string", "Books", 5), _group("string", "Toys", 3),
                                                        _group("string", "Games", 3)]})),
                 (200, _grouping_response({"category": [_group("string", "Books", 5), _group("string", "Toys", 3),
                                                        _group("string", "Games", 3), _group("string", "Art", 3)]})))
    assert da.facets("category", limit=2) == [("Books", 5), ("Art", 3)]
    assert [b["yql"].split("| ")[1] for _, _, b in server.requests] == [
        "all(group(category) max(3) order(-count()) each(output(count())))",
        "all(group(category) max(6) order(-count()) each(output(count())))"]


def test_facets_of_an_optional_field_count_documents_holding_it(server):
    da = open_shelf(server)
    server.queue((200, _grouping_response({"on_sale": [_group("bool", "true", 2), _group("bool", "false", 1)]})))
    assert da.facets("on_sale", filter={"category": "c"}) == [(True, 2), (False, 1)]
    assert server.requests[-1][2]["yql"] == (
        'select * from shelf where (category contains "c" and hs_present contains "on_sale") | '
        "all(group(on_sale) max(11) order(-count()) each(output(count())))")


def test_range_facets_are_labelled_buckets_in_one_query(server):
    da = open_da(server)
    server.queue((200, _grouping_response({"r0": [_bucket(0, 100, 31)], "r1": [],
                                           "r2": [_bucket(500, "9223372036854775807", 3)]})))
    got = da.facets("price", ranges=[(0, 100), (100, 500.5), (500, None), (7, 7)], filter={"category": "c"})
    assert got == [((0, 100), 31), ((100, 500.5), 0), ((500, None), 3), ((7, 7), 0)]
    assert server.requests[-1][2]["yql"] == (
        'select * from product where category contains "c" | all('
        "all(group(predefined(price, bucket(0, 100))) each(output(count())) as(r0)) "
        "all(group(predefined(price, bucket(100, 501))) each(output(count())) as(r1)) "  # x < 500.5 is x < 501
        "all(group(predefined(price, bucket(500, inf))) each(output(count())) as(r2)))")  # (7, 7) is empty: not asked
    server.queue((200, _grouping_response({"r0": []})))
    assert da.facets("rating", ranges=[(None, 2.5)]) == [((None, 2.5), 0)]
    assert "bucket(-inf, 2.5)" in server.requests[-1][2]["yql"]
    n = len(server.requests)
    assert da.facets("price", ranges=[(5, 5)]) == [((5, 5), 0)] and len(server.requests) == n  # nothing to ask


def test_partial_coverage_facets_take_the_generic_count(server):
    da = open_da(server)
    server.queue((200, _grouping_response({"category": [_group("string", "Books", 5)]}, full=False)),
                 (200, _search_response([_hit("a", 0.0, _fields("a", 1, [1, 0, 0, 0], category="Toys"))])))
    assert da.facets("category") == [("Toys", 1)]  # the generic path listed the one match


def _chunk(count, continuation=None):
    """The answer of one chunk of a /document/v1 delete or update by selection."""
    out = {"pathId": "/document/v1/hybridsearch/product/docid", "documentCount": count}
    if continuation:
        out["continuation"] = continuation
    return out


def test_delete_by_filter_is_a_selection_delete_run_by_vespa(server):
    da = open_da(server)
    server.queue((200, _chunk(2, "AAAB")), (200, _chunk(1)))
    assert da.delete(filter={"category": 'a"b', "price": {"$lt": 10.5}}) == 3
    (m1, p1, b1), (m2, p2, _) = server.requests
    path, params = _query(p1)
    assert (m1, path, b1) == ("DELETE", "/document/v1/hybridsearch/product/docid", None)
    assert params == {"selection": '(product.category == "a\\"b" and product.price <= 10)',
                      "cluster": "hybridsearch_content", "timeChunk": "15.0s", "timeout": "30.0s"}
    assert m2 == "DELETE" and _query(p2)[1] == dict(params, continuation="AAAB")


def test_a_selection_delete_that_stops_says_what_it_did(server):
    da = open_da(server, cluster="content_b", max_retries=0)
    server.queue((200, _chunk(2, "AAAB")), (500, {"message": "node down"}))
    with pytest.raises(hs.BackendError, match="status 500.*node down.*2 documents were deleted by the chunks that finished"):
        da.delete(filter={"price": 1})
    assert _query(server.requests[0][1])[1]["cluster"] == "content_b"


def test_a_filter_without_selection_deletes_the_ids_a_query_finds(server):
    da = open_da(server)
    server.queue((200, _search_response([_hit("a", 0.0, _fields("a", 1, [1, 0, 0, 0]))])),
                 (200, {"fields": _fields("a", 1, [1, 0, 0, 0])}), (200, {}))
    assert da.delete(filter={"in_stock": False}) == 1  # bool: no selection value for it
    assert [r[:2] for r in server.requests[1:]] == [("GET", doc_path("hybridsearch", "product", "a")),
                                                    ("DELETE", doc_path("hybridsearch", "product", "a"))]
    assert server.requests[0][2]["yql"] == "select * from product where in_stock = false order by hs_seq asc"


def test_update_many_is_a_selection_update_run_by_vespa(server):
    da = open_shelf(server)
    server.queue((200, {"pathId": "/document/v1/hybridsearch/shelf/docid", "documentCount": 4}))
    assert da.update_many({"category": "c"}, discount=5) == 4
    method, path, body = server.requests[-1]
    assert method == "PUT" and _query(path) == ("/document/v1/hybridsearch/shelf/docid", {
        "selection": 'shelf.category == "c"', "cluster": "hybridsearch_content", "timeChunk": "15.0s",
        "timeout": "30.0s"})
    assert body == {"fields": {"discount": {"assign": 5}, "hs_present": {"add": ["discount"]}}}
    server.queue((200, {"documentCount": 2}))
    assert da.update_many({"discount": {"$gte": 2}}, discount=None, embedding=[0, 1, 0, 0]) == 2
    method, path, body = server.requests[-1]
    assert _query(path)[1]["selection"] == "(shelf.discount != null and shelf.discount >= 2)"
    assert body == {"fields": {"discount": {"assign": None}, "embedding": {"assign": {"values": [0.0, 1.0, 0.0, 0.0]}},
                               "hs_present": {"remove": ["discount"]}}}


def test_update_many_of_unindexed_fields_rewrites_each_match(server):
    da = open_shelf(server)
    old = {"hs_id": "a", "hs_seq": 1, "hs_present": [], "title": "t", "category": "c",
           "embedding": {"values": [1, 0, 0, 0]}, "hs_extra": '{"notes": {}}'}
    server.queue((200, _search_response([_hit("a", 0.0, old)])), (200, {"fields": old}), (200, {}))
    assert da.update_many({"category": "c"}, notes={"k": 1}) == 1  # one JSON string per document
    assert [r[0] for r in server.requests] == ["POST", "GET", "PUT"]
    assert server.requests[-1][2]["fields"]["hs_extra"] == {"assign": '{"notes":{"k":1}}'}


def _linear_hits():
    """A hybrid-profile answer: relevance order, each hit with its text_score match feature."""
    rows = [("b", 2, [1, 1, 1, 0], 4.0), ("c", 3, [1, 1, 0, 0], 2.0), ("a", 1, [1, 0, 0, 0], 0.0),
            ("d", 4, [0, 0, 1, 0], 0.0)]
    return [_hit(i, 9.0, dict(_fields(i, seq, v), matchfeatures={"text_score": t})) for i, seq, v, t in rows]


def test_linear_fusion_is_computed_here_over_one_querys_candidates(server):
    da = open_da(server)
    server.queue((200, _search_response(_linear_hits())))
    res = da.find(text="usb", vector=[1, 0, 0, 0], fusion="linear", weights={"text": 0.3, "vector": 0.7},
                  candidates=2, limit=2)
    body = server.requests[-1][2]
    assert body == {"yql": 'select * from product where (({targetHits: 2, hnsw.exploreAdditionalHits: 98}'
                           'nearestNeighbor(embedding, q)) or (title contains "usb" or description contains "usb"))',
                    "hits": 10000, "ranking": "hybrid", "input.query(q)": [1.0, 0.0, 0.0, 0.0], "timeout": "30.0s"}
    # candidates: the text matches b, c and the 2 best vectors a (1.0), c (0.707); d (0.0) is
    # neither, so the vector part's minimum is b's 0.577: min-max over a, b, c gives text 0, 1,
    # 0.5 and vector 1, 0, (0.707 - 0.577) / (1 - 0.577) -> a 0.7, b 0.3, c 0.365 (with d
    # counted, b would rise to 0.704 and come first)
    c = 0.3 * 0.5 + 0.7 * (np.sqrt(0.5) - np.sqrt(1 / 3)) / (1 - np.sqrt(1 / 3))
    assert res.ids == ["a", "c"]
    np.testing.assert_allclose(res.scores, [0.7, c], rtol=1e-6)


def test_linear_fusion_with_more_candidates_than_max_hits_is_unsupported(server):
    da = open_da(server, max_hits=4)
    server.queue((200, _search_response(_linear_hits())))
    with pytest.raises(hs.UnsupportedError, match="max_hits=4.*normalises over every candidate"):
        da.find(text="usb", vector=[1, 0, 0, 0], fusion="linear", candidates=2, limit=2)


def test_text_fields_weight_and_restrict_the_searched_fields(server):
    da = open_da(server)
    server.queue((200, _search_response([], 0)))
    da.find(text="+usb -cable", text_fields={"title": 2.0}, limit=3)
    body = server.requests[-1][2]
    assert body["yql"] == 'select * from product where title contains "usb" and !(title contains "cable")'
    assert body["input.query(w_title)"] == 2.0 and "input.query(w_description)" not in body
    server.queue((200, _search_response([], 0)))
    da.count(text="usb", text_fields={"title": 1.0, "description": 0.5})
    assert server.requests[-1][2]["input.query(w_description)"] == 0.5


@pytest.mark.parametrize("text,words", [("a*", ["a"]), ('red "phone', ["red", "phone"]), ("field:x", ["field", "x"]),
                                        ("wi-fi", ["wi", "fi"]), ('x") or true or ("', ["x", "or", "true", "or"]),
                                        ("usb\\c ok{", ["usb", "c", "ok"])])
def test_literal_text_is_words_never_vespa_syntax(server, text, words):
    # the audit's cases: what our syntax reads as literal words reaches Vespa as word terms
    da = open_da(server)
    server.queue((200, _search_response([], 0)))
    da.find(text=text, text_fields={"title": 1.0})
    yql = server.requests[-1][2]["yql"]
    assert "userInput" not in yql and "userq" not in server.requests[-1][2]
    assert yql == ("select * from product where ({targetHits: 100}weakAnd("
                   + ", ".join(f'title contains "{w}"' for w in words) + "))")


def test_text_syntax_compiles_per_field():
    from hybridsearch.storages.remote.vespa.lexical import condition
    f = ["title", "notes"]
    assert condition('"new york" -crust', f) == (
        '(title contains phrase("new", "york") or notes contains phrase("new", "york")) and '
        '!(title contains "crust" or notes contains "crust")')
    assert condition("+pizza +crust", f) == ('((title contains "pizza" and title contains "crust") or '
                                             '(notes contains "pizza" and notes contains "crust"))')
    assert condition("new york", f, operator="and") == condition("+new +york", f)
    assert condition("new york", f, grammar="all") == condition("+new +york", f)
    assert condition("+runn* pasta", ["title"]) == \
        'rank(hs_words_title contains ({prefix: true}"runn"), title contains "pasta")'
    assert condition('"one"', ["title"]) == 'title contains "one"'  # a phrase of one word is the word
    for nothing in ("-red", "", "+ - ", '""', "*"):
        assert condition(nothing, f) == "false"


@given(st.text(max_size=40))
@settings(max_examples=300, deadline=None)
def test_any_text_becomes_word_literals_only(text):
    from hybridsearch.engine.analysis import TextAnalyzer
    from hybridsearch.storages.remote.vespa.lexical import condition
    from hybridsearch.query.text import parse_text
    yql = condition(text, ["title"], grammar="any")
    allowed = set(TextAnalyzer(None, False).words(text)) | {c.text for c in parse_text(text) if c.kind == "prefix"}
    literals = [json.loads(m) for m in re.findall(r'"(?:[^"\\]|\\.)*"', yql)]
    assert set(literals) <= allowed
    assert all(w and all(ch.isalnum() or unicodedata.category(ch)[0] == "M" or ch in "\u200c\u200d" for ch in w)
               for w in literals)
    # what is left once the literals are out is the compiler's own structure
    skeleton = re.sub(r'"(?:[^"\\]|\\.)*"', "S", yql)
    assert re.fullmatch(r'[a-z_ ()!,:{}S]*|false', skeleton.replace("phrase", "").replace("hs_words_title", "")
                        .replace("prefix: true", "")), skeleton


def test_optional_bool_false_asks_hs_present():
    # a bool attribute is one bit: a document without the value reads as false in Vespa
    s = schema_of(Shelf)
    c = YqlFilter(s).compile
    assert c(parse_filter({"on_sale": False}, s)) == '(hs_present contains "on_sale" and on_sale = false)'
    assert c(parse_filter({"on_sale": True}, s)) == "on_sale = true"
    docs = [{"on_sale": None, "hs_present": []}, {"on_sale": False, "hs_present": ["on_sale"]},
            {"on_sale": True, "hs_present": ["on_sale"]}]
    as_vespa = [dict(d, on_sale=bool(d["on_sale"])) for d in docs]  # the bit of a missing bool is 0
    for flt, want in (({"on_sale": False}, [1]), ({"on_sale": {"$ne": False}}, [0, 2]), ({"on_sale": True}, [2])):
        pred = YqlEval(c(parse_filter(flt, s))).parse()
        assert [i for i, d in enumerate(as_vespa) if pred(d)] == want, flt


# --------------------------------------------------- document selections
_SEL_TOKEN = re.compile(r'\s*(?:(?P<str>"(?:[^"\\]|\\.)*")|(?P<num>-?\d+(?:\.\d+)?(?:[eE]-?\d+)?)'
                        r'|(?P<op>==|!=|<=|>=|<|>|\(|\))|(?P<word>[A-Za-z_][A-Za-z_0-9.]*))')
_INVALID = object()
_NULL = object()


def _sel_string(lit):
    body, out, i = lit[1:-1], [], 0
    while i < len(body):
        if body[i] == "\\":
            nxt = body[i + 1]
            if nxt == "x":
                out.append(chr(int(body[i + 2:i + 4], 16)))
                i += 4
                continue
            out.append({"n": "\n", "r": "\r", "t": "\t", "f": "\f"}.get(nxt, nxt))
            i += 2
            continue
        assert 0x20 <= ord(body[i]) <= 0x7e, "unescaped character outside printable ASCII"
        out.append(body[i])
        i += 1
    return "".join(out)


class SelectionEval:
    """Evaluates the document-selection subset the compiler writes with the language's
    three-valued logic (Vespa's reference): ordering comparisons with null are invalid,
    `and` / `or` / `not` propagate invalid, an invalid root does not match."""

    def __init__(self, text, doctype):
        pos, self.t, self.i, self.doctype = 0, [], 0, doctype
        while pos < len(text):
            m = _SEL_TOKEN.match(text, pos)
            assert m and m.end() > pos, f"cannot tokenise {text[pos:]!r}"
            pos = m.end()
            self.t.append((m.lastgroup, m.group(m.lastgroup)))

    def take(self):
        self.i += 1
        return self.t[self.i - 1]

    def peek(self):
        return self.t[self.i] if self.i < len(self.t) else (None, None)

    def parse(self):
        node = self.disj()
        assert self.i == len(self.t)
        return lambda d: node(d) is True

    def chain(self, word, operand, combine):
        parts = [operand()]
        while self.peek() == ("word", word):
            self.take()
            parts.append(operand())
        return lambda d: combine([p(d) for p in parts])

    @staticmethod
    def _and(vs):
        return False if False in vs else _INVALID if _INVALID in vs else True

    @staticmethod
    def _or(vs):
        return True if True in vs else _INVALID if _INVALID in vs else False

    def disj(self):
        return self.chain("or", self.conj, self._or)

    def conj(self):
        return self.chain("and", self.unary, self._and)

    def unary(self):
        kind, val = self.take()
        if (kind, val) == ("word", "not"):
            inner = self.unary()
            return lambda d: (lambda v: _INVALID if v is _INVALID else not v)(inner(d))
        if (kind, val) == ("op", "("):
            inner = self.disj()
            assert self.take() == ("op", ")")
            return inner
        if (kind, val) in (("word", "true"), ("word", "false")):
            return lambda d, v=(val == "true"): v
        left = self.value(kind, val)
        _, op = self.take()
        right = self.value(*self.take())
        return lambda d: self.compare(left(d), op, right(d))

    def value(self, kind, val):
        if kind == "str":
            s = _sel_string(val)
            return lambda d: s
        if kind == "num":
            n = float(val) if any(c in val for c in ".eE") else int(val)
            return lambda d: n
        if val == "null":
            return lambda d: _NULL
        doctype, field = val.split(".")
        assert doctype == self.doctype
        return lambda d: _NULL if d.get(field) is None else d[field]

    @staticmethod
    def compare(a, op, b):
        if op in ("==", "!="):
            same = (a is _NULL and b is _NULL) or (a is not _NULL and b is not _NULL
                                                   and isinstance(a, str) == isinstance(b, str) and a == b)
            return same if op == "==" else not same
        if a is _NULL or b is _NULL or isinstance(a, str) != isinstance(b, str):
            return _INVALID
        if isinstance(a, str):
            a, b = a.encode(), b.encode()  # bytewise, as the reference says
        return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


@given(docs=st.lists(doc_strategy, min_size=1, max_size=15),
       flt=filters.filter(lambda f: "in_stock" not in repr(f)))  # bools have no selection (tested below)
@example(docs=[{"category": "a", "brand": None, "price": 0, "discount": None, "rating": 0.0, "in_stock": True}],
         flt={"$not": {"discount": {"$lt": 3}}})  # a missing value fails a comparison, so matches its negation
@settings(max_examples=300, deadline=None)
def test_selection_means_what_the_filter_means(docs, flt):
    from hybridsearch.storages.remote.vespa.selection import NotSelectable, Selection
    rows = [Item(**dict(d, id=f"d{i}", vec=[1.0, 0.0])).model_dump() for i, d in enumerate(docs)]
    try:
        sel = Selection(S, "item").compile(parse_filter(flt, S))
    except NotSelectable as e:
        raise AssertionError(f"{flt} has a selection: {e}") from None
    pred = SelectionEval(sel, "item").parse()
    stored = [dict(r, hs_id=r["id"]) for r in rows]
    assert [r["id"] for r in stored if pred(r)] == [r["id"] for r in rows if matches(r, flt)], sel


def test_selection_literals_and_refusals():
    from hybridsearch.storages.remote.vespa.selection import NotSelectable, Selection, number_literal, string_literal
    c = Selection(S, "item").compile
    assert number_literal(1e20) == "1.0e20" and number_literal(-2.5e-7) == "-2.5e-07" and number_literal(3.0) == "3.0"
    assert string_literal('a"b\\c\nd\x01') == '"a\\"b\\\\c\\nd\\x01"'
    assert c(parse_filter({"price": 2.5}, S)) == "false"
    assert c(parse_filter({"discount": {"$gt": 2.5}}, S)) == "(item.discount != null and item.discount >= 3)"
    assert c(parse_filter({"id": {"$gte": "d3"}}, S)) == 'item.hs_id >= "d3"'
    # bounds moved onto values the field holds, or decided here
    assert c(parse_filter({"rating": {"$gt": 2 ** 63 - 1}}, S)) == "item.rating >= 9.223372036854776e18"
    assert c(parse_filter({"price": {"$lt": 2 ** 70}}, S)) == "true"
    assert c(parse_filter({"discount": {"$gt": -float("inf")}}, S)) == "item.discount != null"
    assert c(parse_filter({"rating": float("inf")}, S)) == "false"
    for flt, why in (({"category": "café"}, "not ASCII"), ({"in_stock": True}, "bool")):
        with pytest.raises(NotSelectable, match=why):
            c(parse_filter(flt, S))


# ------------------------------------------------------------------ a real node
def test_a_real_vespa_node_round_trip():
    """Only where a Vespa container answers at HS_VESPA_URL (loopback) with the package of
    `application_package(Product, doctype="product")` deployed (`vespa deploy`): the tests never
    start or deploy Vespa, and none could be installed where this was written, so this test has not
    run yet. This run's documents carry a category of their own and are deleted after."""
    import os
    import uuid

    url = os.environ.get("HS_VESPA_URL")
    if not url:
        pytest.skip("HS_VESPA_URL is not set (the tests never start a Vespa node)")
    if not url.startswith(("http://127.0.0.1", "https://127.0.0.1", "http://localhost", "https://localhost")):
        pytest.skip(f"HS_VESPA_URL={url} is not a loopback address; the tests only talk to 127.0.0.1")
    run = uuid.uuid4().hex[:12]
    rng = np.random.default_rng(11)
    docs = [{"id": f"hs-test-{run}-{i}", "title": f"red shoe {i}", "category": run, "price": i,
             "embedding": rng.standard_normal(4)} for i in range(20)]
    da = hs.DocumentArray(Product, storage="vespa", url=url, doctype="product")
    try:
        da.extend(docs)
        assert all(d["id"] in da for d in docs) and da[docs[3]["id"]].price == 3
        assert da.find(vector=docs[5]["embedding"], filter={"category": run}, limit=1).ids == [docs[5]["id"]]
        assert da.find(text="shoe 7", filter={"category": run}, limit=1).ids == [docs[7]["id"]]
        assert da.find(filter={"category": run, "price": {"$lt": 3}}, limit=None).ids == [d["id"] for d in docs[:3]]
        da.update(docs[0]["id"], price=77)
        assert da.find(filter={"category": run, "price": 77}).ids == [docs[0]["id"]]
        # API.md sections 7 and 8 on the node
        mine = {"category": run}
        res = da.find(filter=mine, sort=[("price", "desc")], limit=2, offset=1)
        assert res.ids == [docs[19]["id"], docs[18]["id"]] and res.total == 20
        assert da.count(text="shoe", filter=mine) == 20
        assert da.facets("price", filter=mine, ranges=[(0, 10), (10, None)]) == [((0, 10), 9), ((10, None), 11)]
        assert da.facets("category", filter=mine) == [(run, 20)]
        assert da.find(text='"red shoe" -7', filter=mine, limit=30).total == 19
        assert da.find(text="sho*", filter=mine, limit=1).total == 20
        hybrid = da.find(text="shoe 3", vector=docs[3]["embedding"], fusion="linear", filter=mine, limit=1)
        assert hybrid.ids == [docs[3]["id"]]
        assert da.update_many({**mine, "price": {"$lt": 3}}, price=500) == 2
        assert da.count(filter={**mine, "price": 500}) == 2
        assert da.delete(filter={**mine, "price": 500}) == 2
    finally:
        da.delete([d["id"] for d in docs])
