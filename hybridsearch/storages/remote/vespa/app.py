"""The Vespa application package of a collection: a `.sd` schema and `services.xml` (pure text).

The layout follows Vespa's e-commerce hybrid-search benchmark: text fields indexed with
BM25 enabled (and in the `default` fieldset), filterable fields as fast-search attributes,
the vector as an HNSW-indexed tensor attribute, and three rank profiles: `bm25` (the best
text field's weighted score, `text_score`), `closeness` (the vector similarity) and
`hybrid` (their sum, with `text_score` returned as a match feature for linear fusion); a
default query profile raises `maxHits` and `maxOffset`.

Each text field has a weight input `query(w_<field>)` (default 1: `text_fields` sets it)
and a synthetic `hs_words_<field>` array attribute holding its space-separated words:
Vespa matches prefixes only in attributes, never in the BM25 index of a string field
(Vespa's text-matching guide), so a `pre*` clause searches that array. A field's score is
its weight times (its BM25 + the number of prefix clauses matching its words: a prefix
scores a constant 1, as Lucene's constant-score prefix query).
Scores are written so they mean what API.md says: cosine similarity (`cos` of the
angular distance), inner product (minus the dotproduct distance) and -euclidean distance.

API.md section 10 (`field_profile` names each field's profile and query input):
- each dense field is a `tensor<float>(x[d])` attribute with its own HNSW index and
  distance-metric (the field's metric), searched by `nearestNeighbor(<field>, q_<field>)` and
  ranked by its `closeness_<field>` profile (a schema with one dense field keeps `closeness`
  and `query(q)`);
- an hs.SparseVector field is a mapped tensor `tensor<float>(k{})` (the exact weights, for
  ranking) beside a weighted set `hs_keys_<field>` of its keys (for matching: the
  `dotProduct` operator matches every document sharing a key, without pruning); its
  `sparse_<field>` profile ranks every match by `sum(query(q_<field>) * attribute(<field>))`;
- an hs.MultiVector[d] field is a mixed tensor `tensor<float>(t{}, x[d])`; its
  `maxsim_<field>` profile ranks every document holding it by MaxSim over the query's
  `tensor<float>(qt{}, x[d])` with the field's metric (`maxsim_expression`).
"""
from __future__ import annotations

import io
import os
import zipfile
from typing import Optional
from xml.sax.saxutils import quoteattr

from hybridsearch.document import Kind, Schema
from hybridsearch.errors import ConfigError
from hybridsearch.storages.base import resolve_metrics
from hybridsearch.storages.remote.base import EXTRA_FIELD, ID_FIELD, PRESENT_FIELD, SEQ_FIELD

DISTANCE = {"cosine": "angular", "ip": "dotproduct", "l2": "euclidean"}
CONTENT_CLUSTER = "hybridsearch_content"  # the content cluster services_xml() declares
TEXT_SCORE = "text_score"  # the rank profiles' function of the weighted best text field
MAX_OFFSET = 2 ** 31 - 1   # maxOffset of the query profile: sorted finds page with `offset`
_TYPES = {Kind.INT: "long", Kind.FLOAT: "double", Kind.BOOL: "bool", Kind.KEYWORD: "string"}
# Vespa reserves these as field names (and every name must be a plain identifier)
_RESERVED = {"id", "documentid", "sddocname", "relevance", "summaryfeatures", "rankfeatures", "select",
             "where", "and", "or", "not", "true", "false", "document", "schema", "field", "type"}


def check_name(name: str, what: str) -> str:
    """A schema / field name Vespa accepts, else ConfigError (names are pasted into the schema)."""
    if not (isinstance(name, str) and name.isidentifier() and name.isascii() and name.lower() not in _RESERVED
            and not name.startswith("_")):
        raise ConfigError(f"{what} {name!r} cannot be used with Vespa: use an ASCII identifier that is not a "
                          "reserved word and does not start with '_'")
    return name


def similarity(metric: str, field: str) -> str:
    """Ranking expression of API.md's vector score for the metric."""
    if metric == "cosine":
        return f"cos(distance(field, {field}))"
    return f"-distance(field, {field})"  # dotproduct distance is -(q . x); euclidean is the distance


def keys_field(sparse_field: str) -> str:
    """The weighted set of a sparse field's keys, which the dotProduct operator matches."""
    return f"hs_keys_{sparse_field}"


def field_profile(schema: Schema, field: str) -> tuple:
    """(rank profile, query input name) of a vector field of API.md section 10: `closeness`
    and `q` for the one dense field of a schema holding one (the package before section 10),
    else `closeness_<f>` / `q_<f>` (dense), `sparse_<f>` / `q_<f>`, `maxsim_<f>` / `qt_<f>`."""
    if field in schema.sparse:
        return f"sparse_{field}", f"q_{field}"
    if field in schema.multi:
        return f"maxsim_{field}", f"qt_{field}"
    if schema.vector is not None and schema.vector.name == field:
        return "closeness", "q"
    return f"closeness_{field}", f"q_{field}"


def sparse_expression(field: str, q: str) -> str:
    """The exact dot product of the query's sparse tensor with the document's."""
    return f"sum(query({q}) * attribute({field}))"


def maxsim_expression(metric: str, field: str, q: str) -> str:
    """MaxSim as API.md defines it: per query row (qt) the best similarity over the document's
    rows (t) with the field's metric (inner product, cosine similarity, or minus the euclidean
    distance), summed over the query rows."""
    a, b = f"query({q})", f"attribute({field})"
    if metric == "ip":
        sim = f"sum({a} * {b}, x)"
    elif metric == "cosine":
        sim = f"sum({a} * {b}, x) / (sqrt(sum({a} * {a}, x)) * sqrt(sum({b} * {b}, x)))"
    else:
        sim = f"-sqrt(sum(({a} - {b}) * ({a} - {b}), x))"
    return f"sum(reduce({sim}, max, t), qt)"


BM25_K1_PLUS_1 = 2.2  # Vespa's bm25 = Lucene's BM25 x (k1 + 1), k1 = 1.2


def words_field(text_field: str) -> str:
    """The synthetic array attribute holding a text field's words (for prefix clauses)."""
    return f"hs_words_{text_field}"


def weight_input(text_field: str) -> str:
    """The query input weighting a text field's score (text_fields=)."""
    return f"query(w_{text_field})"


def bm25_expression(texts: list) -> str:
    """The best text field's score (max over the fields, as multi_match best_fields): each
    field's weight times its BM25 plus its prefix clauses that match (1 each). Vespa's bm25
    feature keeps the classic formula's (k1 + 1) = 2.2 factor, which API.md's (Lucene's) drops:
    divided out here, so text scores and sum/linear fusion weigh as on every other storage."""
    terms = [f"{weight_input(t)} * (bm25({t}) / {BM25_K1_PLUS_1} + matchCount({words_field(t)}))" for t in texts]
    expr = terms[0]
    for t in terms[1:]:
        expr = f"max({expr}, {t})"
    return expr


def _field(name: str, type_: str, indexing: str, body: list) -> list:
    """One field's lines, indented as inside its block."""
    lines = [f"field {name} type {type_} {{", f"    indexing: {indexing}"]
    lines += [f"    {b}" for b in body]
    return lines + ["}"]


def _document_fields(schema: Schema, metrics: dict, m: int, ef_construct: int) -> tuple:
    """(lines of the document's fields, names of its text fields)."""
    fast = ["attribute {", "    fast-search", "}"]
    exact = fast + ["match {", "    word", "    cased", "}"]
    lines = _field(ID_FIELD, "string", "attribute | summary", exact)
    lines += _field(SEQ_FIELD, "long", "attribute | summary", fast)
    lines += _field(PRESENT_FIELD, "array<string>", "attribute | summary", fast)
    lines += _field(EXTRA_FIELD, "string", "summary", [])
    texts = []
    for spec in schema.fields.values():
        if spec.kind is Kind.ID or spec.kind is Kind.OTHER:
            continue
        check_name(spec.name, "field")
        if spec.kind is Kind.TEXT:
            texts.append(spec.name)
            lines += _field(spec.name, "string", "index | summary", ["index: enable-bm25"])
        elif spec.kind is Kind.KEYWORD:
            lines += _field(spec.name, "string", "attribute | summary", exact)
        elif spec.kind in _TYPES:
            lines += _field(spec.name, _TYPES[spec.kind], "attribute | summary", fast)
        elif spec.kind is Kind.VECTOR:
            lines += _field(spec.name, f"tensor<float>(x[{spec.dim}])", "attribute | index | summary",
                            ["attribute {", f"    distance-metric: {DISTANCE[metrics[spec.name]]}", "}",
                             "index {", "    hnsw {", f"        max-links-per-node: {m}",
                             f"        neighbors-to-explore-at-insert: {ef_construct}", "    }", "}"])
        elif spec.kind is Kind.SPARSE:
            lines += _field(spec.name, "tensor<float>(k{})", "attribute | summary", [])
            lines += _field(keys_field(spec.name), "weightedset<string>", "attribute", fast)
        elif spec.kind is Kind.MULTI:
            lines += _field(spec.name, f"tensor<float>(t{{}}, x[{spec.dim}])", "attribute | summary", [])
    return lines, texts


def _words_fields(texts: list) -> list:
    """The synthetic word arrays (outside the document: derived at indexing), split on spaces
    as Vespa's text-matching guide does for prefix search on terms."""
    lines = []
    for t in texts:
        lines += [f"    {line}" for line in _field(words_field(t), "array<string>",
                                                     f'input {t} | trim | split " +" | attribute',
                                                     ["attribute {", "    fast-search", "}"])]
    return lines


def _profile(name: str, expression: str, inputs: list, text_score: Optional[str] = None,
             match_text: bool = False) -> list:
    """One rank profile: its inputs, the text_score function (when given), the first phase."""
    out = [f"    rank-profile {name} {{"]
    if inputs:
        out += ["        inputs {"] + [f"            {i}" for i in inputs] + ["        }"]
    if text_score is not None:
        out += [f"        function {TEXT_SCORE}() {{", "            expression {", f"                {text_score}",
                "            }", "        }"]
    out += ["        first-phase {", "            expression {", f"                {expression}",
            "            }", "        }"]
    if match_text:  # linear fusion reads the text part of each hit beside its vector
        out += ["        match-features {", f"            {TEXT_SCORE}", "        }"]
    return out + ["    }"]


def schema_sd(schema: Schema, doctype: str, metric, m: int, ef_construct: int) -> str:
    """The `.sd` text of the collection's schema; `metric` as the `metric=` option takes it (a
    string, or a dict field -> metric)."""
    check_name(doctype, "document type")
    metrics = resolve_metrics(schema, metric)
    fields, texts = _document_fields(schema, metrics, m, ef_construct)
    lines = [f"schema {doctype} {{", f"    document {doctype} {{"] + [f"        {f}" for f in fields] + ["    }"]
    lines += _words_fields(texts)
    if texts:
        lines += ["    fieldset default {", f"        fields: {', '.join(texts)}", "    }"]
    vec = schema.vector
    weights = [f"{weight_input(t)} double: 1.0" for t in texts]
    q = [f"query(q) tensor<float>(x[{vec.dim}])"] if vec is not None else []
    if texts:
        lines += _profile("bm25", TEXT_SCORE, weights, bm25_expression(texts))
    if vec is not None:
        lines += _profile("closeness", similarity(metrics[vec.name], vec.name), q)
    if texts and vec is not None:
        lines += _profile("hybrid", f"{TEXT_SCORE} + {similarity(metrics[vec.name], vec.name)}", q + weights,
                          bm25_expression(texts), match_text=True)
    lines += _field_profiles(schema, metrics)
    lines.append("}")
    return "\n".join(lines) + "\n"


def _field_profiles(schema: Schema, metrics: dict) -> list:
    """The rank profile of each vector field beyond a lone dense one (API.md section 10)."""
    out = []
    for name, spec in schema.vectors.items():
        if schema.vector is None:  # several dense fields: one profile each
            profile, q = field_profile(schema, name)
            out += _profile(profile, similarity(metrics[name], name), [f"query({q}) tensor<float>(x[{spec.dim}])"])
    for name in schema.sparse:
        profile, q = field_profile(schema, name)
        out += _profile(profile, sparse_expression(name, q), [f"query({q}) tensor<float>(k{{}})"])
    for name, spec in schema.multi.items():
        profile, q = field_profile(schema, name)
        out += _profile(profile, maxsim_expression(metrics[name], name, q),
                        [f"query({q}) tensor<float>(qt{{}}, x[{spec.dim}])"])
    return out


def services_xml(doctype: str, app: str = "hybridsearch") -> str:
    """services.xml: one container (search + document API) and one content cluster."""
    check_name(doctype, "document type")
    return "\n".join([
        '<?xml version="1.0" encoding="UTF-8"?>',
        '<services version="1.0">',
        f'    <container id={quoteattr(app + "_container")} version="1.0">',
        "        <search></search>",
        "        <document-api></document-api>",
        "        <document-processing></document-processing>",
        "    </container>",
        f'    <content id={quoteattr(CONTENT_CLUSTER)} version="1.0">',
        "        <redundancy>1</redundancy>",
        "        <documents>",
        f'            <document type={quoteattr(doctype)} mode="index"></document>',
        "        </documents>",
        "        <nodes>",
        '            <node distribution-key="0" hostalias="node1"></node>',
        "        </nodes>",
        "    </content>",
        "</services>",
    ]) + "\n"


def query_profile_xml(max_hits: int) -> str:
    """search/query-profiles/default.xml: raises `maxHits` (Vespa refuses more than 400 hits per
    query by default, and a vector query asks for `limit` or `candidates` hits) and `maxOffset`
    (default 1000: a sorted find longer than max_hits pages on with `offset`)."""
    if isinstance(max_hits, bool) or not isinstance(max_hits, int) or max_hits < 1:
        raise ConfigError(f"max_hits must be an integer >= 1, got {max_hits!r}")
    return "\n".join(['<query-profile id="default" type="root">',
                      f'    <field name="maxHits">{max_hits}</field>',
                      f'    <field name="maxOffset">{MAX_OFFSET}</field>',
                      "</query-profile>"]) + "\n"


# the type the default profile names; empty: every field in the profile is a native parameter
QUERY_PROFILE_TYPE_XML = '<query-profile-type id="root">\n</query-profile-type>\n'


def application_files(schema: Schema, doctype: str, metric, m: int, ef_construct: int,
                      max_hits: int = 10000) -> dict:
    """Relative path -> text of every file of the application package."""
    return {f"schemas/{doctype}.sd": schema_sd(schema, doctype, metric, m, ef_construct),
            "services.xml": services_xml(doctype),
            "search/query-profiles/default.xml": query_profile_xml(max_hits),
            "search/query-profiles/types/root.xml": QUERY_PROFILE_TYPE_XML}


def write_application(files: dict, path: str) -> str:
    """Writes the package to a folder (for `vespa deploy <folder>`), or to a .zip when path ends in .zip."""
    if str(path).endswith(".zip"):
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
            for name, text in sorted(files.items()):
                z.writestr(name, text)
        with open(path, "wb") as f:
            f.write(buf.getvalue())
        return str(path)
    for name, text in files.items():
        target = os.path.join(path, name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w", encoding="utf-8") as f:
            f.write(text)
    return str(path)
