"""What the face and query/ hand to the storages, below the public API: the Schema a Document
class becomes, the filter AST, the planner's plans, and the AnnLite storage's filter dict.

Why below the public API: these are the internal forms every storage receives (the API only
shows their effect, which tests/contract checks on every storage); the planner's thresholds
are stated at collection sizes no test collection reaches."""
import json

from hypothesis import given, settings

import hybridsearch as hs
# internal: the forms below are the units under test (see the docstring)
from hybridsearch.document import Kind, schema_of
from hybridsearch.query import planner
from hybridsearch.query.filters import And, Compare, Exists, In, MatchAll, Not, Or, parse_filter
from hybridsearch.storages.wrapped.annlite.filter import AnnliteFilter
from tests.contract.test_document import Product
from tests.contract.test_filters import json_like
from tests.models import AnnliteItem, FilterItem

S = schema_of(FilterItem)


# ---------------------------------------------------------------- schema
def test_field_kinds_are_introspected():
    s = schema_of(Product)
    kinds = {n: f.kind for n, f in s.fields.items()}
    assert kinds == {
        "id": Kind.ID, "title": Kind.TEXT, "description": Kind.TEXT, "category": Kind.KEYWORD,
        "brand": Kind.KEYWORD, "price": Kind.INT, "average_rating": Kind.FLOAT, "in_stock": Kind.BOOL,
        "embedding": Kind.VECTOR, "meta": Kind.OTHER,
    }
    assert s.vector.name == "embedding" and s.vector.dim == 3
    assert [t.name for t in s.texts] == ["title", "description"]
    assert s.fields["description"].analyzer.stemmer is None
    assert s.fields["title"].analyzer.stemmer == "english"
    assert s.fields["brand"].optional and not s.fields["category"].optional


# ---------------------------------------------------------------- filters
def test_parse_shapes():
    assert parse_filter({"category": "Books"}, S) == Compare("category", "$eq", "Books")
    assert parse_filter({"price": {"$gte": 10, "$lt": 100}}, S) == And(
        (Compare("price", "$gte", 10), Compare("price", "$lt", 100)))
    assert parse_filter({"category": {"$in": ["A", "B"]}}, S) == In("category", ("A", "B"))
    assert parse_filter({"$or": [{"price": {"$lt": 10}}, {"in_stock": False}]}, S) == Or(
        (Compare("price", "$lt", 10), Compare("in_stock", "$eq", False)))
    assert parse_filter({"$not": {"category": "Books"}}, S) == Not(Compare("category", "$eq", "Books"))
    assert parse_filter({"name": {"$exists": True}}, S) == Exists("name")
    assert parse_filter({"brand": {"$ne": "x"}}, S) == Not(Compare("brand", "$eq", "x"))
    assert parse_filter({}, S) == MatchAll()
    assert parse_filter({"id": {"$in": ["a"]}}, S) == In("id", ("a",))


@given(json_like)
@settings(max_examples=500, deadline=None)
def test_what_parses_is_an_ast_node(flt):
    """The inputs of tests/contract/test_filters.py's parser fuzz: a FilterError or one of the nodes."""
    try:
        node = parse_filter(flt, S)
    except hs.FilterError:
        return
    assert isinstance(node, (Compare, In, Exists, And, Or, Not, MatchAll))


def test_annlite_filter_dicts_are_parameterised():
    schema = schema_of(AnnliteItem)
    flt = AnnliteFilter(schema).compile(
        parse_filter({"$not": {"group": "x' OR 1=1 --"}, "order": {"$in": [1, 2]}}, schema))
    text = json.dumps(flt)
    assert "x' OR 1=1 --" in text  # the value is data inside the dict, never SQL text
    assert flt == {"$and": [{"c_group": {"$neq": "x' OR 1=1 --"}}, {"c_order": {"$in": [1, 2]}}]}


# ---------------------------------------------------------------- planner
def test_planner_thresholds():
    assert planner.plan(0, 1000, 10, 64).strategy == planner.EXACT
    assert planner.plan(10, 100000, 10, 64).strategy == planner.EXACT
    assert planner.plan(9000, 1000000, 10, 64).strategy == planner.EXACT      # few matches
    assert planner.plan(15000, 1000000, 10, 64).strategy == planner.EXACT     # under 2%
    p = planner.plan(50000, 1000000, 10, 64, filter_first_below=0.15)
    assert p.strategy == planner.FILTER_FIRST and p.ef == 128
    assert planner.plan(50000, 1000000, 10, 64).strategy == planner.EXACT      # scanning 5% is cheaper
    p = planner.plan(150000, 1000000, 10, 64)
    assert p.strategy == planner.GRAPH and p.ef > 64                           # widened at 15 %
    assert planner.plan(150000, 1000000, 10, 64, walk_share=0.25).ef < 64      # a narrower beam on request
    assert planner.plan(150000, 1000000, 10, 64, visit_cost=100).strategy == planner.EXACT
    assert planner.plan(2000, 100000, 10, 64, exact_max=0, exact_below=0, visit_cost=0).strategy == planner.GRAPH
    assert planner.plan(100000, 100000, 10, 64, filtered=False).strategy == planner.GRAPH
    assert planner.plan(100000, 100000, 10, 64, exact=True).strategy == planner.EXACT
    assert planner.plan(10, 20, 50, 8).ef == 50


def test_plan_names_are_the_ones_stats_reports():
    """tests/storages/local/test_hnsw.py reads these names from da.stats()["last_plan"]."""
    assert (planner.EXACT, planner.FILTER_FIRST, planner.GRAPH) == ("exact", "filter_first", "graph")
