"""API.md section 10 (named dense, sparse and multi-vector fields) on storage="vespa", without a
Vespa engine (none can run here; the contract suites test_named_vectors.py, test_sparse_vectors.py
and test_multi_vectors.py need a node):

- the schema's fields and rank profiles of each kind against pyvespa's builders;
- the exact requests sent for each kind (YQL, ranking profile, input.query(...) tensors);
- a local node (`Node`) that keeps what /document/v1 writes and answers /search/ by evaluating,
  with a small tensor evaluator written here, the first-phase expression of the rank profile
  that the storage's own application package declares, on the documents it holds (matching as
  the YQL says: nearestNeighbor's targetHits nearest, dotProduct's shared keys, the filter);
  the answers through the public API are then checked against tests/models.py (exact scores,
  MaxSim, dot products, fusion_reference).
"""
import json
import math
import re
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Optional
from urllib.parse import parse_qs, unquote, urlsplit

import numpy as np
import pytest

import hybridsearch as hs
from hybridsearch.document import schema_of
from hybridsearch.storages.remote.vespa import app as A
from hybridsearch.storages.remote.vespa import tensors as T
from tests.contract.section10 import assert_fused, assert_topk_of
from tests.models import exact_scores, fusion_reference, maxsim_scores
from tests.storages.remote.test_vespa import SelectionEval, YqlEval


class Page(hs.Document):
    title: hs.Text = ""
    tag: hs.Keyword = "a"
    price: int = 0
    text_vec: hs.Vector[4]
    image_vec: Optional[hs.Vector[3]] = None
    splade: hs.SparseVector = {}
    colbert: Optional[hs.MultiVector[4]] = None


METRICS = {"text_vec": "cosine", "image_vec": "ip", "colbert": "cosine"}


# ------------------------------------------------------------ tensor evaluation
class Tn:
    """A tensor as Vespa's model has it: dimension names and cells address -> value (indexed
    labels are their numbers as strings)."""

    def __init__(self, dims, cells):
        self.dims, self.cells = tuple(dims), cells

    @staticmethod
    def scalar(v):
        return Tn((), {(): float(v)})

    def value(self):
        assert self.dims == (), self.dims
        return self.cells.get((), 0.0)


def _join(a: Tn, b: Tn, f) -> Tn:
    """Vespa's join: every pair of cells agreeing on the common dimensions."""
    dims = tuple(sorted(set(a.dims) | set(b.dims)))
    common = [d for d in a.dims if d in b.dims]
    index: dict = {}
    for addr, w in b.cells.items():
        m = dict(zip(b.dims, addr))
        index.setdefault(tuple(m[d] for d in common), []).append((m, w))
    out = {}
    for addr, v in a.cells.items():
        m = dict(zip(a.dims, addr))
        for mb, w in index.get(tuple(m[d] for d in common), []):
            mm = {**m, **mb}
            out[tuple(mm[d] for d in dims)] = f(v, w)
    return Tn(dims, out)


def _reduce(a: Tn, agg, dims) -> Tn:
    keep = tuple(d for d in a.dims if dims and d not in dims)
    groups: dict = {}
    for addr, v in a.cells.items():
        m = dict(zip(a.dims, addr))
        groups.setdefault(tuple(m[d] for d in keep), []).append(v)
    out = {k: agg(vs) for k, vs in groups.items()}
    if not keep and not out:
        out = {(): 0.0}  # the sum of no cells
    return Tn(keep, out)


def tensor_of(type_: str, value) -> Tn:
    """A tensor JSON value (short forms, as written) of a declared type."""
    dims = re.findall(r"(\w+)(\{\}|\[\d+\])", type_)
    mapped = [d for d, k in dims if k == "{}"]
    indexed = [d for d, k in dims if k != "{}"]
    if isinstance(value, dict):
        value = value.get("values", value.get("cells", value.get("blocks", value)))
        if isinstance(value, dict):
            value = {k: v for k, v in value.items() if k != "type"}
    if not mapped:
        return Tn((indexed[0],), {(str(i),): float(v) for i, v in enumerate(value)})
    if not indexed:
        return Tn((mapped[0],), {(str(k),): float(v) for k, v in value.items()})
    cells = {}
    for label, row in value.items():
        for j, v in enumerate(row):
            cells[(str(label), str(j))] = float(v)
    return _canon(Tn((mapped[0], indexed[0]), cells))


def _canon(t: Tn) -> Tn:
    """The tensor with its dimensions sorted (join and reduce keep them sorted)."""
    order = sorted(range(len(t.dims)), key=lambda i: t.dims[i])
    return Tn([t.dims[i] for i in order], {tuple(a[i] for i in order): v for a, v in t.cells.items()})


_EXPR = re.compile(r"\s*(?:(?P<num>\d+(?:\.\d*)?)|(?P<name>[A-Za-z_][A-Za-z_0-9]*)|(?P<op>[-+*/(),]))")


class Expression:
    """Evaluates the ranking-expression subset the package writes: + - * /, unary minus,
    query(n), attribute(n), distance(field, f), sum(e[, dims]), reduce(e, max|sum, dims),
    sqrt, cos, max(a, b)."""

    def __init__(self, text, env):
        self.t, self.i, self.env = [], 0, env
        pos = 0
        while pos < len(text.strip()):
            m = _EXPR.match(text, pos)
            assert m and m.end() > pos, text[pos:]
            pos = m.end()
            self.t.append((m.lastgroup, m.group(m.lastgroup)))

    def run(self) -> Tn:
        v = self.expr()
        assert self.i == len(self.t), self.t[self.i:]
        return v

    def peek(self):
        return self.t[self.i] if self.i < len(self.t) else (None, None)

    def take(self, want=None):
        tok = self.t[self.i]
        self.i += 1
        assert want is None or tok[1] == want, (tok, want)
        return tok

    def expr(self):
        v = self.term()
        while self.peek()[1] in ("+", "-"):
            op = self.take()[1]
            w = self.term()
            v = _join(v, w, (lambda a, b: a + b) if op == "+" else (lambda a, b: a - b))
        return v

    def term(self):
        v = self.unary()
        while self.peek()[1] in ("*", "/"):
            op = self.take()[1]
            w = self.unary()
            v = _join(v, w, (lambda a, b: a * b) if op == "*" else (lambda a, b: a / b))
        return v

    def unary(self):
        if self.peek()[1] == "-":
            self.take()
            v = self.unary()
            return Tn(v.dims, {k: -x for k, x in v.cells.items()})
        return self.atom()

    def names(self):
        out = []
        while self.peek()[1] == ",":
            self.take()
            out.append(self.take()[1])
        return out

    def atom(self):
        kind, val = self.take()
        if kind == "num":
            return Tn.scalar(float(val))
        if val == "(":
            v = self.expr()
            self.take(")")
            return v
        if self.peek()[1] != "(":  # a function of the profile
            return Expression(self.env["functions"][val], self.env).run()
        self.take("(")
        if val in ("bm25", "matchCount"):
            name = self.take()[1]
            self.take(")")
            return Tn.scalar(self.env[val](name))
        if val in ("query", "attribute"):
            name = self.take()[1]
            self.take(")")
            return self.env[val](name)
        if val == "distance":
            self.take("field")
            self.take(",")
            field = self.take()[1]
            self.take(")")
            return Tn.scalar(self.env["distance"](field))
        if val == "reduce":
            v = self.expr()
            self.take(",")
            agg = {"max": max, "sum": sum}[self.take()[1]]
            dims = self.names()
            self.take(")")
            return _reduce(v, agg, dims)
        v = self.expr()
        if val == "sum":
            dims = self.names()
            self.take(")")
            return _reduce(v, sum, dims)
        if val == "max":
            self.take(",")
            w = self.expr()
            self.take(")")
            return _join(v, w, max)
        self.take(")")
        f = {"sqrt": math.sqrt, "cos": math.cos}[val]
        return Tn(v.dims, {k: f(x) for k, x in v.cells.items()})


class Package:
    """What the node reads from the storage's application package: field types, distance
    metrics, rank profiles (inputs and first-phase expression)."""

    def __init__(self, sd: str):
        self.texts = set(re.findall(r"field (\w+) type string \{\s*indexing: index", sd))
        self.types = dict(re.findall(r"field (\w+) type (\S+(?: \S+)*?) \{", sd))
        self.metric = {}
        for name, body in re.findall(r"field (\w+) type [^{]*\{(.*?)\n        \}", sd, re.S):
            m = re.search(r"distance-metric: (\w+)", body)
            if m:
                self.metric[name] = m.group(1)
        self.profiles = {}
        for name, body in re.findall(r"rank-profile (\w+) \{(.*?)\n    \}", sd, re.S):
            inputs = dict(re.findall(r"query\((\w+)\) (tensor<float>\([^)]*\))", body))
            defaults = {k: float(v) for k, v in re.findall(r"query\((\w+)\) double: ([\d.]+)", body)}
            functions = dict(re.findall(r"function (\w+)\(\) \{\s*expression \{\s*(.*?)\s*\}", body, re.S))
            expr = re.search(r"first-phase \{\s*expression \{\s*(.*?)\s*\}", body, re.S).group(1)
            self.profiles[name] = (inputs, defaults, functions, expr)


# ------------------------------------------------------------------ the node
_NN = re.compile(r"^\(\{(?:approximate: false, )?targetHits: (\d+), hnsw\.exploreAdditionalHits: \d+\}"
                 r"nearestNeighbor\((\w+), (\w+)\)\)")
_DOT = re.compile(r'^dotProduct\((\w+), \{((?:"\d+": 1(?:, )?)*)\}\)')
_HYBRID = re.compile(r"^\(\(\{(?:approximate: false, )?targetHits: (\d+), hnsw\.exploreAdditionalHits: \d+\}"
                     r"nearestNeighbor\((\w+), (\w+)\)\) or (.*?)\)(?: and (.*))?$")
_HOLDS = re.compile(r'^hs_present contains "(\w+)"')


class Node:
    """A local Vespa stand-in: /document/v1 puts, updates (assign), gets and deletes kept in a
    dict, and /search/ answered by evaluating the request's rank profile from the package."""

    def __init__(self, package: Package):
        self.package, self.docs, self.requests = package, {}, []
        node = self

        class Handler(BaseHTTPRequestHandler):
            def _handle(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(n)) if n else None
                node.requests.append((self.command, self.path, body))
                status, data = node.answer(self.command, self.path, body)
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

    def rendered(self, fields: dict) -> dict:
        """Stored fields as Vespa renders them: tensors in short form with their type, the
        keys' weighted set (an attribute outside the summary) left out."""
        out = {}
        for k, v in fields.items():
            if k.startswith("hs_keys_"):
                continue
            t = self.package.types.get(k, "")
            out[k] = {"type": t, **v} if t.startswith("tensor") else v
        return out

    def answer(self, method, path, body):
        parts = urlsplit(path)
        if parts.path.startswith("/document/v1/"):
            params = parse_qs(parts.query)
            if "selection" in params:  # a write by condition over every document it selects
                pred = SelectionEval(params["selection"][0], "page").parse()
                chosen = [i for i, f in self.docs.items() if pred(f)]
                for i in chosen:
                    self.write(method, i, body)
                return 200, {"documentCount": len(chosen)}
            if "wantedDocumentCount" in params:  # a visit: every document in one chunk
                return 200, {"documents": [{"id": f"id:hybridsearch:page::{i}", "fields": self.rendered(f)}
                                           for i, f in self.docs.items()], "documentCount": len(self.docs)}
            id_ = unquote(parts.path.rsplit("/", 1)[1])
            if method == "GET":
                if id_ not in self.docs:
                    return 404, {"id": id_}
                return 200, {"id": id_, "fields": self.rendered(self.docs[id_])}
            self.write(method, id_, body)
            return 200, {"id": id_}
        assert (method, parts.path) == ("POST", "/search/")
        return 200, self.search(body)

    def write(self, method, id_, body):
        if method == "POST":
            self.docs[id_] = body["fields"]
        elif method == "PUT":
            doc = self.docs[id_]
            for k, op in body["fields"].items():
                if "add" in op:
                    doc[k] = list(dict.fromkeys(doc.get(k, []) + op["add"]))
                elif "remove" in op:
                    doc[k] = [x for x in doc.get(k, []) if x not in op["remove"]]
                elif op["assign"] is None:
                    doc.pop(k, None)
                else:
                    doc[k] = op["assign"]
        elif method == "DELETE":
            self.docs.pop(id_, None)

    def search(self, body):
        yql = body["yql"]
        if yql.endswith("order by hs_seq desc limit 1"):  # the insertion-sequence probe on open
            best = sorted(self.docs.values(), key=lambda f: -f["hs_seq"])[:1]
            return _response([{"relevance": 0.0, "fields": {"hs_seq": f["hs_seq"]}} for f in best])
        cond = re.match(r"^select \* from page where (.*)$", yql).group(1)
        if "ranking" not in body:  # a count or a listing in insertion order: YQL conditions only
            cond = cond.removesuffix(" order by hs_seq asc")
            keep = YqlEval(cond).parse() if cond != "true" else (lambda d: True)
            docs = sorted((d for d in self.docs.values() if keep(self.tokenised(d))), key=lambda d: d["hs_seq"])
            return _response([{"relevance": 0.0, "fields": self.rendered(d)} for d in docs[:body["hits"]]], len(docs))
        inputs_decl, defaults, functions, expr = self.package.profiles[body["ranking"]]
        inputs = {name: tensor_of(t, body[f"input.query({name})"]) for name, t in inputs_decl.items()}
        inputs.update({k: Tn.scalar(body.get(f"input.query({k})", v)) for k, v in defaults.items()})
        # text terms: weakAnd read as the OR it approximates (these collections are small)
        cond = re.sub(r"\(\{targetHits: \d+\}weakAnd\((.*?)\)\)",
                      lambda m: "((" + m.group(1).replace(", ", " or ") + "))", cond)
        terms = {}
        for f, w in re.findall(r'(\w+) contains "([^"]*)"', cond):
            if f in self.package.texts:
                terms.setdefault(f, []).append(w)
        docs = list(self.docs.values())
        nn = None
        if m := _HYBRID.match(cond):  # the hybrid profile's query: the vector's nearest or the text's matches
            nn = (int(m.group(1)), m.group(2), m.group(3))
            near = [d for d in docs if nn[1] in d]
            near = sorted(near, key=lambda d: -self.rank(d, expr, inputs, nn, functions, terms))[:nn[0]]
            text = YqlEval(m.group(4)).parse()
            docs = [d for d in docs if any(d is x for x in near) or text(self.tokenised(d))]
            cond = m.group(5) or ""
            nn = None if body["ranking"] != "hybrid" else nn
        elif m := _NN.match(cond):
            nn = (int(m.group(1)), m.group(2), m.group(3))
            cond = cond[m.end():]
            docs = [d for d in docs if m.group(2) in d]
        elif m := _DOT.match(cond):
            keys = set(re.findall(r'"(\d+)"', m.group(2)))
            docs = [d for d in docs if keys & set(d.get(m.group(1), {}))]
            cond = cond[m.end():]
        elif m := _HOLDS.match(cond):
            docs = [d for d in docs if m.group(1) in d["hs_present"]]
            cond = cond[m.end():]
        cond = cond.removeprefix(" and ").strip()
        if cond and cond != "true":
            keep = YqlEval(cond).parse()
            docs = [d for d in docs if keep(self.tokenised(d))]
        scored = [(self.rank(d, expr, inputs, nn, functions, terms), d) for d in docs]
        if nn is not None:  # nearestNeighbor exposes its targetHits nearest (closeness here)
            scored = sorted(scored, key=lambda p: -p[0])[:nn[0]]
        # ties in reverse insertion order unless the request sorts them by insertion: the
        # storage must ask for that, or break them itself
        seq = 1 if body.get("sorting") == "-[relevance] +hs_seq" else -1
        scored.sort(key=lambda p: (-p[0], seq * p[1]["hs_seq"]))
        hits = [{"relevance": s, "fields": self.rendered(d)} for s, d in scored[:body["hits"]]]
        if "text_score" in functions:  # the profile's match-features
            for h, (_, d) in zip(hits, scored):
                h["fields"]["matchfeatures"] = {"text_score": float(Expression(
                    "text_score", {"query": lambda n: inputs[n], "functions": functions, "matchCount": lambda f: 0.0,
                                   "bm25": lambda f, d=d: self.bm25(d, f, terms)}).run().value())}
        return _response(hits, len(scored))

    def tokenised(self, doc):
        """The document as matching sees it: each text field a list of its words."""
        return {k: (_words(v) if k in self.package.texts else v) for k, v in doc.items()}

    def bm25(self, doc, field, terms) -> float:
        """Vespa's bm25 rank feature (k1 1.2, b 0.75; its idf counts the documents holding the
        field) of the query's terms searching the field."""
        holding = [_words(d.get(field, "")) for d in self.docs.values()]
        holding = [h for h in holding if h]
        words = _words(doc.get(field, ""))
        if not words:
            return 0.0
        avg = sum(map(len, holding)) / len(holding)
        s = 0.0
        for t in terms.get(field, []):
            tf = words.count(t)
            if tf:
                n = sum(1 for h in holding if t in h)
                s += math.log(1 + (len(holding) - n + 0.5) / (n + 0.5)) * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * len(words) / avg))
        return s

    def rank(self, doc, expr, inputs, nn, functions=None, terms=None) -> float:
        def attribute(name):
            return tensor_of(self.package.types[name], doc[name])

        def distance(field):
            q = np.array([inputs[nn[2]].cells[(str(i),)] for i in range(len(inputs[nn[2]].cells))])
            if field not in doc:  # a document the text matched without a vector: ranked last
                return 1e30
            x = np.array(doc[field]["values"], dtype=np.float64)
            metric = self.package.metric[field]
            if metric == "angular":
                return math.acos(max(-1.0, min(1.0, float(q @ x / (np.linalg.norm(q) * np.linalg.norm(x))))))
            if metric == "dotproduct":
                return float(-(q @ x))
            return float(np.linalg.norm(q - x))

        v = Expression(expr, {"query": lambda n: inputs[n], "attribute": attribute, "distance": distance,
                              "functions": functions or {}, "bm25": lambda f: self.bm25(doc, f, terms or {}),
                              "matchCount": lambda f: 0.0}).run()
        return float(np.float32(v.value()))  # the engine's float precision

    def close(self):
        self.server.shutdown()


def _words(text) -> list:
    return re.findall(r"[a-z0-9]+", str(text).lower())


def _response(children, total=None):
    return {"root": {"id": "toplevel", "relevance": 1.0, "fields": {"totalCount": len(children) if total is None
                                                                    else total},
                     "coverage": {"coverage": 100, "documents": len(children), "full": True, "nodes": 1,
                                  "results": 1, "resultsFull": 1},
                     "children": children}}


def _package(metrics=METRICS):
    files = A.application_files(schema_of(Page), "page", metrics, 16, 200)
    return Package(files["schemas/page.sd"])


@pytest.fixture
def node():
    n = Node(_package())
    yield n
    n.close()


def _open(node, **kw):
    return hs.DocumentArray(Page, storage="vespa", url=node.url, doctype="page", metric=METRICS, **kw)


def _corpus(n=40, seed=0):
    """Pages with every kind, some without an image vector, colbert tokens, or sparse keys;
    values drawn from few levels so that equal scores happen."""
    rng = np.random.default_rng(seed)
    docs = []
    for i in range(n):
        sparse = {int(k): float(rng.integers(1, 4)) / 2 for k in rng.choice(12, size=rng.integers(0, 4),
                                                                            replace=False)}
        docs.append(Page(id=f"p{i}", tag="ab"[i % 2], price=i, text_vec=rng.integers(-2, 3, 4) + 0.5,
                         image_vec=None if i % 3 == 0 else rng.normal(size=3),
                         splade=sparse, colbert=None if i % 4 == 0 else rng.normal(size=(int(rng.integers(1, 4)), 4))))
    return docs


def _model(docs, field, q, metric=None):
    """id -> API.md's score of every document the field's list matches (tests/models.py)."""
    out = {}
    for d in docs:
        v = getattr(d, field)
        if field == "splade":
            shared = set(v) & set(q)
            if shared:
                out[d.id] = sum(q[k] * v[k] for k in shared)
        elif v is not None:
            if field == "colbert":
                out[d.id] = float(maxsim_scores([np.asarray(v)], np.asarray(q, dtype=np.float32), metric)[0])
            else:
                out[d.id] = float(exact_scores(np.asarray(v, dtype=np.float32)[None, :],
                                               np.asarray(q, dtype=np.float32), metric)[0])
    return out


# ------------------------------------------------------------ application package
def test_field_kinds_and_profiles_equal_pyvespas_rendering():
    vp = pytest.importorskip("vespa.package", reason="pyvespa is in the [test] extra")
    ours = A.schema_sd(schema_of(Page), "page", METRICS, 16, 200)
    kw = dict(indexing=["attribute", "summary"], attribute=["fast-search"])
    hnsw = dict(indexing=["attribute", "index", "summary"])
    fields = [vp.Field(name="hs_id", type="string", **kw, match=["word", "cased"]),
              vp.Field(name="hs_seq", type="long", **kw),
              vp.Field(name="hs_present", type="array<string>", **kw),
              vp.Field(name="hs_extra", type="string", indexing=["summary"]),
              vp.Field(name="title", type="string", indexing=["index", "summary"], index="enable-bm25"),
              vp.Field(name="tag", type="string", **kw, match=["word", "cased"]),
              vp.Field(name="price", type="long", **kw),
              vp.Field(name="text_vec", type="tensor<float>(x[4])", **hnsw,
                       ann=vp.HNSW(distance_metric="angular", max_links_per_node=16,
                                   neighbors_to_explore_at_insert=200)),
              vp.Field(name="image_vec", type="tensor<float>(x[3])", **hnsw,
                       ann=vp.HNSW(distance_metric="dotproduct", max_links_per_node=16,
                                   neighbors_to_explore_at_insert=200)),
              vp.Field(name="splade", type="tensor<float>(k{})", indexing=["attribute", "summary"]),
              vp.Field(name="hs_keys_splade", type="weightedset<string>", indexing=["attribute"],
                       attribute=["fast-search"]),
              vp.Field(name="colbert", type="tensor<float>(t{}, x[4])", indexing=["attribute", "summary"])]
    words = vp.Field(name="hs_words_title", type="array<string>", is_document_field=False,
                     attribute=["fast-search"], indexing=["input title", "trim", 'split " +"', "attribute"])
    w = [("query(w_title)", "double", "1.0")]
    text_score = [vp.Function(name="text_score", expression="query(w_title) * (bm25(title) / 2.2 + "
                                                            "matchCount(hs_words_title))")]
    cos = ("sum(query(qt_colbert) * attribute(colbert), x) / (sqrt(sum(query(qt_colbert) * query(qt_colbert), x)) "
           "* sqrt(sum(attribute(colbert) * attribute(colbert), x)))")
    profiles = [vp.RankProfile(name="bm25", inputs=w, functions=text_score, first_phase="text_score"),
                vp.RankProfile(name="closeness_text_vec", inputs=[("query(q_text_vec)", "tensor<float>(x[4])")],
                               first_phase="cos(distance(field, text_vec))"),
                vp.RankProfile(name="closeness_image_vec", inputs=[("query(q_image_vec)", "tensor<float>(x[3])")],
                               first_phase="-distance(field, image_vec)"),
                vp.RankProfile(name="sparse_splade", inputs=[("query(q_splade)", "tensor<float>(k{})")],
                               first_phase="sum(query(q_splade) * attribute(splade))"),
                vp.RankProfile(name="maxsim_colbert", inputs=[("query(qt_colbert)", "tensor<float>(qt{}, x[4])")],
                               first_phase=f"sum(reduce({cos}, max, t), qt)")]
    theirs = vp.Schema(name="page", document=vp.Document(fields=fields),
                       fieldsets=[vp.FieldSet(name="default", fields=["title"])], rank_profiles=profiles)
    theirs.add_fields(words)
    assert ours.split() == theirs.schema_to_text.split()


@pytest.mark.parametrize("metric,sim", [
    ("ip", "sum(query(q) * attribute(m), x)"),
    ("l2", "-sqrt(sum((query(q) - attribute(m)) * (query(q) - attribute(m)), x))"),
    ("cosine", "sum(query(q) * attribute(m), x) / (sqrt(sum(query(q) * query(q), x)) * "
               "sqrt(sum(attribute(m) * attribute(m), x)))")])
def test_maxsim_expression_evaluates_to_the_models_maxsim(metric, sim):
    """Each metric's expression, evaluated by Vespa's tensor semantics (join, reduce), is
    tests/models.py's MaxSim."""
    expr = A.maxsim_expression(metric, "m", "q")
    assert expr == f"sum(reduce({sim}, max, t), qt)"
    rng = np.random.default_rng(3)
    for _ in range(20):
        D, Q = rng.normal(size=(int(rng.integers(1, 5)), 3)), rng.normal(size=(int(rng.integers(1, 4)), 3))
        env = {"query": lambda n: tensor_of("tensor<float>(qt{}, x[3])", T.multi_query(Q)),
               "attribute": lambda n: tensor_of("tensor<float>(t{}, x[3])", T.encode_multi(D))}
        got = Expression(expr, env).run().value()
        assert math.isclose(got, maxsim_scores([D], Q, metric)[0], rel_tol=1e-5, abs_tol=1e-6)


def test_tensor_forms_vespa_renders_read_back():
    """Short (as written), long (address/value cells, address/values blocks) and short-value
    forms decode alike."""
    block = np.array([[1, 2], [3, 4], [5, 6]], dtype=np.float32)
    longb = {"type": "tensor<float>(t{},x[2])", "blocks": [{"address": {"t": str(i)}, "values": r.tolist()}
                                                          for i, r in reversed(list(enumerate(block)))]}
    cells = {"cells": [{"address": {"t": str(i), "x": str(j)}, "value": float(block[i, j])}
                       for i in range(3) for j in range(2)]}
    for form in (T.encode_multi(block), longb, cells, T.encode_multi(block)["blocks"]):
        np.testing.assert_array_equal(T.decode_multi(form, 2), block)
    sparse = {3: 0.5, 17: 2.0}
    long_s = {"type": "tensor<float>(k{})", "cells": [{"address": {"k": "17"}, "value": 2.0},
                                                        {"address": {"k": "3"}, "value": 0.5}]}
    for form in (T.encode_sparse(sparse), {"type": "tensor<float>(k{})", **T.encode_sparse(sparse)}, long_s,
                 {"3": 0.5, "17": 2.0}):
        assert T.decode_sparse(form) == sparse
    with pytest.raises(hs.BackendError, match="multi-vector"):
        T.decode_multi({"type": "tensor<float>(t{},x[2])"}, 2)


# -------------------------------------------------------------- requests sent
def test_each_kind_sends_its_profile_and_query_tensor(node):
    da = _open(node)
    da.extend(_corpus(6))
    node.requests.clear()
    da.find(vector={"image_vec": [1.0, 0.0, 2.0]}, limit=2, filter={"tag": "a"}, ef=5)
    da.find(vector={"splade": {7: 1.5, 2: 0.25}}, limit=3)
    Q = np.array([[1, 0, 0, 0], [0, 0.5, 0, 0]], dtype=np.float32)
    da.find(vector={"colbert": Q}, limit=2, filter={"price": {"$lt": 4}})
    bodies = [b for m, p, b in node.requests if p == "/search/"]
    assert bodies[0] == {"yql": 'select * from page where ({targetHits: 2, hnsw.exploreAdditionalHits: 3}'
                                'nearestNeighbor(image_vec, q_image_vec)) and tag contains "a"',
                         "hits": 2, "ranking": "closeness_image_vec", "input.query(q_image_vec)": [1.0, 0.0, 2.0],
                         "timeout": "30.0s", "sorting": "-[relevance] +hs_seq"}
    # the sparse query's keys ascending (the checked form), every key weighted 1 for matching
    assert bodies[1] == {"yql": 'select * from page where dotProduct(hs_keys_splade, {"2": 1, "7": 1})',
                         "hits": 3 + 8, "ranking": "sparse_splade", "input.query(q_splade)": {"2": 0.25, "7": 1.5},
                         "timeout": "30.0s", "sorting": "-[relevance] +hs_seq"}
    assert bodies[2] == {"yql": 'select * from page where hs_present contains "colbert" and price < 4',
                         "hits": 2 + 8, "ranking": "maxsim_colbert",
                         "input.query(qt_colbert)": {"0": [1.0, 0.0, 0.0, 0.0], "1": [0.0, 0.5, 0.0, 0.0]},
                         "timeout": "30.0s", "sorting": "-[relevance] +hs_seq"}


def test_writes_carry_every_kind_in_tensor_form(node):
    da = _open(node)
    doc = Page(id="x", text_vec=[1, 2, 3, 4], splade={5: 0.5, 1: 2.0}, colbert=[[1, 0, 0, 0], [0, 1, 0, 0]])
    da.extend([doc])
    put = [b for m, p, b in node.requests if m == "POST" and p.startswith("/document/v1/")][-1]["fields"]
    assert put["text_vec"] == {"values": [1.0, 2.0, 3.0, 4.0]} and "image_vec" not in put
    assert put["splade"] == {"cells": {"5": 0.5, "1": 2.0}} and put["hs_keys_splade"] == {"5": 1, "1": 1}
    assert put["colbert"] == {"blocks": {"0": [1.0, 0.0, 0.0, 0.0], "1": [0.0, 1.0, 0.0, 0.0]}}
    got = da["x"]
    assert got.splade == {5: 0.5, 1: 2.0} and got.image_vec is None
    np.testing.assert_array_equal(np.asarray(got.colbert), np.asarray(doc.colbert))
    da.update("x", splade={9: 1.0}, colbert=None, image_vec=[0, 0, 1])
    update = node.requests[-1][2]["fields"]
    assert update["splade"] == {"assign": {"cells": {"9": 1.0}}} and update["hs_keys_splade"] == {"assign": {"9": 1}}
    assert update["colbert"] == {"assign": None} and update["image_vec"] == {"assign": {"values": [0.0, 0.0, 1.0]}}
    got = da["x"]
    assert got.splade == {9: 1.0} and got.colbert is None and list(got.image_vec) == [0.0, 0.0, 1.0]


# ------------------------------------------------------ answers through the API
@pytest.mark.parametrize("field", ["text_vec", "image_vec", "splade", "colbert"])
def test_each_fields_list_is_the_models_topk(node, field):
    da = _open(node)
    docs = _corpus()
    da.extend(docs)
    rng = np.random.default_rng(11)
    for trial in range(4):
        if field == "splade":
            q = {int(k): float(rng.integers(1, 3)) for k in rng.choice(12, size=3, replace=False)}
        elif field == "colbert":
            q = rng.normal(size=(2, 4)).astype(np.float32)
        else:
            q = rng.integers(-2, 3, Page.model_fields[field].annotation.__args__[0].dim
                             if field == "image_vec" else 4).astype(np.float32) + 0.5
        flt = {"tag": "a"} if trial % 2 else None
        pool = [d for d in docs if flt is None or d.tag == "a"]
        model = _model(pool, field, q, METRICS.get(field))
        res = da.find(vector={field: q}, limit=5, filter=flt, exact=field in ("text_vec", "image_vec"))
        assert_topk_of(res, model, 5)
        np.testing.assert_array_equal(res.part_scores[field], res.scores)
    # find_batched: each query's answer alike
    if field == "splade":
        queries = [{1: 1.0, 4: 2.0}, {11: 0.5}]
    elif field == "colbert":
        queries = [rng.normal(size=(3, 4)), rng.normal(size=(1, 4))]
    else:
        queries = rng.normal(size=(2, 3 if field == "image_vec" else 4)).astype(np.float32)
    for q, res in zip(queries, da.find_batched({field: queries}, limit=4, exact=True)):
        assert_topk_of(res, _model(docs, field, q, METRICS.get(field)), 4)


def test_ties_at_the_cut_go_to_the_earlier_document(node):
    """The node breaks equal scores against insertion order and cuts at hits: the storage reads
    more while the k-th ties with the last and ranks ties by insertion."""
    da = _open(node)
    da.extend([Page(id=f"t{i}", text_vec=[1, 0, 0, 0], splade={1: 1.0}) for i in range(20)])
    res = da.find(vector={"splade": {1: 2.0}}, limit=3)
    assert res.ids == ["t0", "t1", "t2"] and res.scores.tolist() == [2.0, 2.0, 2.0]
    hits = [b["hits"] for m, p, b in node.requests if p == "/search/" and b.get("ranking") == "sparse_splade"]
    assert hits == [11, 22]


@pytest.mark.parametrize("fusion", ["rrf", "sum", "linear"])
def test_several_lists_fuse_as_the_model(node, fusion):
    da = _open(node)
    docs = _corpus(30, seed=5)
    da.extend(docs)
    order = [d.id for d in docs]
    rng = np.random.default_rng(8)
    qs = {"text_vec": rng.normal(size=4).astype(np.float32), "image_vec": rng.normal(size=3).astype(np.float32),
          "splade": {2: 1.0, 5: 0.5, 9: 2.0}, "colbert": rng.normal(size=(2, 4)).astype(np.float32)}
    weights = {"text_vec": 0.1, "image_vec": 0.2, "splade": 0.3, "colbert": 0.4} if fusion == "linear" else None
    flt = {"price": {"$gte": 4}}
    pool = [d for d in docs if d.price >= 4]
    res = da.find(vector=qs, fusion=fusion, limit=6, candidates=7, filter=flt, weights=weights, exact=True)
    lists = [(f, _model(pool, f, q, METRICS.get(f)), False, math.nan) for f, q in qs.items()]
    fused, parts = fusion_reference(order, lists, fusion, candidates=7, weights=weights)
    if fusion != "rrf":  # a document holding a sparse value that shares no key scores 0 (API.md), not NaN
        held = {d.id for d in docs if d.splade}
        parts["splade"] = {i: (0.0 if math.isnan(v) and i in held else v) for i, v in parts["splade"].items()}
    assert_fused(res, fused, parts, 6)


def test_update_many_and_delete_by_condition_carry_every_kind(node):
    """update_many is a selection update run by the node: the sparse value with its keys, the
    multi-vector blocks, hs_present; the finds afterwards see the new values."""
    da = _open(node)
    docs = _corpus(12, seed=4)
    da.extend(docs)
    n = da.update_many({"tag": "a"}, splade={3: 1.5}, colbert=np.ones((1, 4)))
    assert n == 6
    sent = [b for m, p, b in node.requests if m == "PUT"][-1]
    assert sent == {"fields": {"splade": {"assign": {"cells": {"3": 1.5}}}, "hs_keys_splade": {"assign": {"3": 1}},
                               "colbert": {"assign": {"blocks": {"0": [1.0, 1.0, 1.0, 1.0]}}},
                               "hs_present": {"add": ["splade", "colbert"]}}}  # a non-empty sparse value exists
    now = [d.model_copy(update={"splade": {3: 1.5}, "colbert": np.ones((1, 4))}) if d.tag == "a" else d for d in docs]
    res = da.find(vector={"splade": {3: 1.0}}, limit=20)
    assert_topk_of(res, _model(now, "splade", {3: 1.0}), 20)
    Q = np.array([[1, 1, 0, 0]], dtype=np.float32)
    assert_topk_of(da.find(vector={"colbert": Q}, limit=20), _model(now, "colbert", Q, "cosine"), 20)
    assert da.delete(filter={"tag": "a"}) == 6
    rest = [d for d in now if d.tag != "a"]
    assert_topk_of(da.find(vector={"splade": {3: 1.0}}, limit=20), _model(rest, "splade", {3: 1.0}), 20)


def test_columns_carry_every_kind(node):
    """extend_columns writes every kind, to_columns reads them back (sparse as dicts,
    multi-vector as arrays, None where absent), in insertion order."""
    da = _open(node)
    docs = _corpus(6, seed=2)
    da.extend_columns({"id": [d.id for d in docs], "text_vec": np.array([d.text_vec for d in docs]),
                       "splade": [d.splade for d in docs], "colbert": [d.colbert for d in docs],
                       "image_vec": [d.image_vec for d in docs]})
    cols = da.to_columns(fields=["id", "splade", "colbert", "image_vec"])
    assert list(cols["id"]) == [d.id for d in docs]
    assert list(cols["splade"]) == [d.splade for d in docs]
    for d, c, im in zip(docs, cols["colbert"], cols["image_vec"]):
        assert (c is None) == (d.colbert is None) and (im is None) == (d.image_vec is None)
        if d.colbert is not None:
            np.testing.assert_array_equal(np.asarray(c), np.asarray(d.colbert, dtype=np.float32))




@pytest.mark.parametrize("fusion", ["rrf", "sum", "linear"])
def test_text_with_several_fields_fuses_as_the_model(node, fusion):
    """Text + a sparse and a dense list: text_top, the fields' lists, and the BM25 of the
    candidates the lexical top left out read by a query restricted to their ids (bm25_of)."""
    from tests.contract.test_lexical import bm25_field, plain_tokens
    da = _open(node)
    docs = _corpus(24, seed=9)
    words = ["usb", "cable", "red", "phone", "case"]
    rng = np.random.default_rng(1)
    # a filler word repeated by position: every title has its own length, so no two BM25 tie (the
    # text list's ties at its cut are the lexical suites' subject, not this one's)
    docs = [d.model_copy(update={"title": " ".join([*rng.choice(words, size=int(rng.integers(1, 5))), *["zz"] * n])})
            for n, d in enumerate(docs)]
    da.extend(docs)
    qs = {"splade": {2: 1.0, 5: 0.5}, "text_vec": rng.normal(size=4).astype(np.float32)}
    weights = {"text": 0.5, "splade": 0.2, "text_vec": 0.3} if fusion == "linear" else None
    node.requests.clear()
    res = da.find(text="usb cable", vector=qs, fusion=fusion, limit=5, candidates=3, weights=weights)
    bm = bm25_field({d.id: d for d in docs}, "title", ["usb", "cable"], plain_tokens)
    lists = [("text", bm, False, 0.0)] + [(f, _model(docs, f, q, METRICS.get(f)), False, math.nan)
                                          for f, q in qs.items()]
    fused, parts = fusion_reference([d.id for d in docs], lists, fusion, candidates=3, weights=weights)
    if fusion != "rrf":
        held = {d.id for d in docs if d.splade}
        parts["splade"] = {i: (0.0 if math.isnan(v) and i in held else v) for i, v in parts["splade"].items()}
    assert_fused(res, fused, parts, 5)
    by_ids = [b for m, p, b in node.requests if p == "/search/" and "hs_id contains" in b["yql"]]
    if fusion == "rrf":
        assert by_ids == []  # rrf reads ranks only
    else:
        assert by_ids and all(b["ranking"] == "bm25" for b in by_ids)


def test_bad_values_are_refused_before_any_request(node):
    da = _open(node)
    da.extend(_corpus(3))
    node.requests.clear()
    with pytest.raises(hs.SchemaError):
        da.find(vector={"splade": {-1: 1.0}})
    with pytest.raises(hs.SchemaError):
        da.find(vector={"colbert": np.ones((2, 3))})
    with pytest.raises(hs.SchemaError):
        da.find(vector={"text_vec": [np.nan, 0, 0, 1]})
    with pytest.raises(hs.ConfigError, match="text_vec"):
        da.find(vector=[1, 0, 0, 0])  # two dense fields: the dict form names one
    with pytest.raises(hs.ConfigError):
        da.find(vector={"nope": [1, 0, 0, 0]})
    with pytest.raises(hs.SchemaError):
        da.extend([{"id": "z", "text_vec": [1, 0, 0, 0], "splade": {1: float("inf")}}])
    with pytest.raises(hs.SchemaError):
        da.update("p0", colbert=np.zeros((1, 4)))  # a zero row has no norm in [1e-15, 1e15]
    assert node.requests == []
    with pytest.raises(hs.ConfigError, match="splade"):
        hs.DocumentArray(Page, storage="vespa", url=node.url, doctype="page", metric={"splade": "ip"})


def test_offset_and_min_score_cut_a_fields_ranking(node):
    da = _open(node)
    docs = _corpus(30, seed=6)
    da.extend(docs)
    q = {1: 1.0, 3: 2.0, 8: 0.5}
    model = _model(docs, "splade", q)
    full = da.find(vector={"splade": q}, limit=12)
    assert_topk_of(full, model, 12)
    page = da.find(vector={"splade": q}, limit=4, offset=3)
    assert page.ids == full.ids[3:7]
    floor = float(full.scores[5])
    above = da.find(vector={"splade": q}, limit=12, min_score=floor)
    assert above.ids == [i for i, s in zip(full.ids, full.scores) if s >= floor]


# ------------------------------------------------------------ section-10 fixes
class Sparse2(hs.Document):
    tag: hs.Keyword = "a"
    text_vec: hs.Vector[4]
    splade: hs.SparseVector = {}
    sp: Optional[hs.SparseVector] = None


@pytest.fixture
def node2():
    n = Node(Package(A.application_files(schema_of(Sparse2), "page", {"text_vec": "cosine"}, 16, 200)
                     ["schemas/page.sd"]))
    yield n
    n.close()


def _sparse_docs():
    """Every combination of {} and a value on the required field, None / {} / a value on the
    optional one, twice."""
    docs = []
    for i, (req, opt) in enumerate([(r, o) for r in ({}, {1: 1.0}) for o in (None, {}, {2: 0.5})] * 2):
        docs.append(Sparse2(id=f"s{i}", tag="ab"[i % 2], text_vec=[1, 0, 0, i], splade=req, sp=opt))
    return docs


def _holds(v) -> bool:
    """API.md section 10: a sparse value exists when it is not None and not {}."""
    return v is not None and v != {}


@pytest.mark.parametrize("field", ["splade", "sp"])
@pytest.mark.parametrize("want", [True, False])
def test_exists_on_a_sparse_field_is_false_for_empty(node2, field, want):
    """$exists over {} / a value / None on a required and an optional sparse field: count,
    find and delete by filter match the model, and {} and None read back as themselves."""
    da = hs.DocumentArray(Sparse2, storage="vespa", url=node2.url, doctype="page", metric={"text_vec": "cosine"})
    docs = _sparse_docs()
    da.extend(docs)
    assert [da[d.id].sp for d in docs] == [d.sp for d in docs]
    flt = {field: {"$exists": want}}
    expected = [d.id for d in docs if _holds(getattr(d, field)) == want]
    assert da.count(filter=flt) == len(expected)
    assert sorted(da.find(filter=flt, limit=50).ids) == sorted(expected)
    both = {"$and": [flt, {"tag": "a"}]}
    gone = [d.id for d in docs if _holds(getattr(d, field)) == want and d.tag == "a"]
    assert da.delete(filter=both) == len(gone)
    assert sorted(d.id for d in da) == sorted(d.id for d in docs if d.id not in gone)


@pytest.mark.parametrize("field,value", [("splade", {}), ("splade", {3: 1.0}), ("sp", {}), ("sp", None),
                                         ("sp", {3: 1.0})])
def test_update_many_keeps_exists_of_a_sparse_field(node2, field, value):
    """update_many setting {} / None / a value: $exists afterwards is the model's, and the
    value reads back as set."""
    da = hs.DocumentArray(Sparse2, storage="vespa", url=node2.url, doctype="page", metric={"text_vec": "cosine"})
    docs = _sparse_docs()
    da.extend(docs)
    assert da.update_many({"tag": "a"}, **{field: value}) == sum(d.tag == "a" for d in docs)
    now = [d.model_copy(update={field: value}) if d.tag == "a" else d for d in docs]
    for want in (True, False):
        flt = {field: {"$exists": want}}
        assert da.count(filter=flt) == sum(_holds(getattr(d, field)) == want for d in now)
    assert [getattr(da[d.id], field) for d in now] == [getattr(d, field) for d in now]


def _tied(n):
    """n pages whose sparse and multi-vector scores all tie (binary weights, one token)."""
    return [Page(id=f"t{i}", text_vec=[1, 0, 0, 0], splade={1: 1.0, 2: 1.0}, colbert=[[1, 0, 0, 0]])
            for i in range(n)]


@pytest.mark.parametrize("field,q", [("splade", {1: 1.0, 2: 1.0}), ("colbert", [[1.0, 0.0, 0.0, 0.0]])])
def test_equal_scores_are_cut_by_insertion_order(node, field, q):
    """Many equal scores, more than one request's first read: the top-k are the earliest
    inserted (the model: a stable sort of insertion order by score), and Vespa is asked to
    cut ties by insertion order."""
    da = _open(node)
    docs = _tied(30)
    da.extend(docs)
    res = da.find(vector={field: q}, limit=5)
    model = _model(docs, field, q, METRICS.get(field))
    expected = sorted(model, key=lambda i: -model[i])[:5]  # stable: insertion order among ties
    assert res.ids == expected == ["t0", "t1", "t2", "t3", "t4"]
    bodies = [b for m, p, b in node.requests if p == "/search/" and b.get("ranking", "").endswith(field)]
    assert bodies and all(b["sorting"] == "-[relevance] +hs_seq" for b in bodies)


@pytest.mark.parametrize("field,q", [("splade", {1: 1.0, 2: 1.0}), ("colbert", [[1.0, 0.0, 0.0, 0.0]])])
def test_ties_beyond_max_hits_are_refused_not_guessed(node, field, q):
    """More equal scores than max_hits: no request can show which documents tie at the cut,
    so the find raises UnsupportedError rather than returning some of them."""
    da = _open(node, max_hits=16)
    da.extend(_tied(40))
    with pytest.raises(hs.errors.UnsupportedError, match="max_hits"):
        da.find(vector={field: q}, limit=5)


class Shop(hs.Document):
    title: hs.Text = ""
    v: Optional[hs.Vector[3]] = None


@pytest.mark.parametrize("fusion,exact", [("sum", False), ("sum", True), ("linear", False)])
def test_hybrid_without_an_optional_l2_vector_fuses_nan_as_zero(fusion, exact):
    """Text + an optional l2 vector on the hybrid profile: a document the text matches without
    a vector has the vector part NaN (fused as 0), not the l2 score of a zero vector (-|q|),
    as fusion_reference says."""
    from tests.contract.test_lexical import bm25_field, plain_tokens
    node = Node(Package(A.application_files(schema_of(Shop), "page", {"v": "l2"}, 16, 200)["schemas/page.sd"]))
    try:
        da = hs.DocumentArray(Shop, storage="vespa", url=node.url, doctype="page", metric={"v": "l2"})
        rng = np.random.default_rng(3)
        words = ["usb", "cable", "red", "phone"]
        docs = [Shop(id=f"d{i}", title=" ".join([*rng.choice(words, size=int(rng.integers(1, 4))), *["zz"] * i]),
                     v=None if i % 3 == 0 else rng.normal(size=3)) for i in range(12)]
        da.extend(docs)
        q = np.array([1.0, 2.0, 3.0], dtype=np.float32)
        res = da.find(text="usb cable", vector=q, fusion=fusion, exact=exact, limit=12)
        bm = bm25_field({d.id: d for d in docs}, "title", ["usb", "cable"], plain_tokens)
        vec = {d.id: float(exact_scores(np.asarray(d.v, dtype=np.float32)[None, :], q, "l2")[0])
               for d in docs if d.v is not None}
        fused, parts = fusion_reference([d.id for d in docs], [("text", bm, exact, 0.0), ("vector", vec, False, math.nan)],
                                        fusion)
        assert any(math.isnan(parts["vector"][i]) for i in res.ids)  # the case under test is there
        assert_fused(res, fused, parts, 12)
    finally:
        node.close()
