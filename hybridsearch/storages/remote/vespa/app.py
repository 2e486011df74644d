"""The Vespa application package of a collection: a `.sd` schema and `services.xml` (pure text).

The layout follows Vespa's e-commerce hybrid-search benchmark: text fields indexed with
BM25 enabled (and in the `default` fieldset, so `userInput` searches them), filterable
fields as fast-search attributes, the vector as an HNSW-indexed tensor attribute, and
three rank profiles: `bm25` (the best text field's BM25), `closeness` (the vector
similarity) and `hybrid` (their sum); a default query profile raises `maxHits`.
Scores are written so they mean what API.md says: cosine similarity (`cos` of the
angular distance), inner product (minus the dotproduct distance) and -euclidean distance.
"""
from __future__ import annotations

import io
import os
import zipfile
from xml.sax.saxutils import quoteattr

from hybridsearch.document import Kind, Schema
from hybridsearch.errors import ConfigError
from hybridsearch.storages.remote.base import EXTRA_FIELD, ID_FIELD, PRESENT_FIELD, SEQ_FIELD

DISTANCE = {"cosine": "angular", "ip": "dotproduct", "l2": "euclidean"}
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


def bm25_expression(texts: list) -> str:
    """The best text field's BM25 (max over the fields, as multi_match best_fields)."""
    terms = [f"bm25({t})" for t in texts]
    expr = terms[0]
    for t in terms[1:]:
        expr = f"max({expr}, {t})"
    return expr


def _field(name: str, type_: str, indexing: str, body: list) -> list:
    lines = [f"        field {name} type {type_} {{", f"            indexing: {indexing}"]
    lines += [f"            {b}" for b in body]
    return lines + ["        }"]


def schema_sd(schema: Schema, doctype: str, metric: str, m: int, ef_construct: int) -> str:
    """The `.sd` text of the collection's schema."""
    check_name(doctype, "document type")
    fast = ["attribute {", "    fast-search", "}"]
    lines = [f"schema {doctype} {{", f"    document {doctype} {{"]
    lines += _field(ID_FIELD, "string", "attribute | summary", fast + ["match {", "    word", "    cased", "}"])
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
            lines += _field(spec.name, "string", "attribute | summary", fast + ["match {", "    word", "    cased", "}"])
        elif spec.kind in _TYPES:
            lines += _field(spec.name, _TYPES[spec.kind], "attribute | summary", fast)
        elif spec.kind is Kind.VECTOR:
            lines += _field(spec.name, f"tensor<float>(x[{spec.dim}])", "attribute | index | summary",
                            ["attribute {", f"    distance-metric: {DISTANCE[metric]}", "}",
                             "index {", "    hnsw {", f"        max-links-per-node: {m}",
                             f"        neighbors-to-explore-at-insert: {ef_construct}", "    }", "}"])
    lines.append("    }")
    if texts:
        lines += ["    fieldset default {", f"        fields: {', '.join(texts)}", "    }"]
    vec = schema.vector

    def profile(name: str, expression: str, with_input: bool) -> list:
        out = [f"    rank-profile {name} {{"]
        if with_input:
            out += ["        inputs {", f"            query(q) tensor<float>(x[{vec.dim}])", "        }"]
        return out + ["        first-phase {", "            expression {", f"                {expression}",
                      "            }", "        }", "    }"]

    if texts:
        lines += profile("bm25", bm25_expression(texts), False)
    if vec is not None:
        lines += profile("closeness", similarity(metric, vec.name), True)
    if texts and vec is not None:
        lines += profile("hybrid", f"{bm25_expression(texts)} + {similarity(metric, vec.name)}", True)
    lines.append("}")
    return "\n".join(lines) + "\n"


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
        f'    <content id={quoteattr(app + "_content")} version="1.0">',
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
    query by default, and a vector query asks for `limit` or `candidates` hits)."""
    if isinstance(max_hits, bool) or not isinstance(max_hits, int) or max_hits < 1:
        raise ConfigError(f"max_hits must be an integer >= 1, got {max_hits!r}")
    return "\n".join(['<query-profile id="default" type="root">',
                      f'    <field name="maxHits">{max_hits}</field>',
                      "</query-profile>"]) + "\n"


# the type the default profile names; empty: every field in the profile is a native parameter
QUERY_PROFILE_TYPE_XML = '<query-profile-type id="root">\n</query-profile-type>\n'


def application_files(schema: Schema, doctype: str, metric: str, m: int, ef_construct: int,
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
