"""Per query: how to run a (filtered) vector search on a graph storage.

LESSONS.md §6: no single algorithm serves every filter. From the filter's
selectivity s (popcount of its bitset over the graph's nodes) the planner estimates
the cost of both ways, in units of one exact row scored, and takes the cheaper:

- exact scan of the matches: `matches` rows, sequential in slot order, and exact;
- plain HNSW walk, the bitset deciding what is a result: `walk_ef` gives its beam (ef
  matches, widened as s falls: the true neighbours are farther out) and `walk_cost`
  the nodes it scores (fitted to measurements at 200k x 128, SIFT-like, m=16).
  The beam holds only matches, so it spans ~ef/s nodes: on SIFT-like data a third of
  ef kept recall@10 >= 0.95 from 10 % to 90 %, on clustered 32-d data it fell to 0.83
  at 90 % -- so the default keeps ef, and `filter_ef` < 1 is a trade a user opts into.

Hard floors keep tiny filters exact (`exact_max` matches or `exact_below` of the
graph). The two-hop filter-first walk (ACORN-style) stays available below
`filter_first_below` (off by default: on these measurements the plain walk reached the
same recall with fewer visits at every selectivity it won at).

A graph search that returns fewer than min(limit, matches) hits falls back to the
exact scan, so the contract "min(limit, matches) hits, all matching" always holds.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

EXACT = "exact"
GRAPH = "graph"
FILTER_FIRST = "filter_first"


@dataclass(frozen=True)
class Plan:
    """The strategy chosen for one query batch and the ef it runs with."""

    strategy: str
    ef: int
    selectivity: float


# the beam: ef * WALK_EF * (1 + WIDEN / s) matches (SIFT-like 200k, ef 64, recall@10 >= 0.96
# needed ~24 at 50-90 %, ~34 at 20 %, ~46 at 10 %: the same shape, a third of the size)
WALK_EF, WIDEN = 1.0, 0.12
# nodes a plain walk scores per beam slot: VISITS_BASE + VISITS_PER_SEL / s (fitted: 6 + 17 / s)
VISITS_BASE, VISITS_PER_SEL = 6.0, 17.0
# one node of the walk (a cache miss on its links, int8 codes) costs ~3 exact rows scored in
# slot order (60 ns vs 19 ns at 128-d)
VISIT_COST = 3.0


def walk_ef(ef: int, limit: int, sel: float, share: float = WALK_EF) -> int:
    """The beam (in matches) of a plain walk at selectivity `sel` for the user's `ef`."""
    return max(limit, int(round(ef * share * (1.0 + WIDEN / max(sel, 1e-9)))))


def walk_cost(ef: int, sel: float, visit_cost: float = VISIT_COST) -> float:
    """Estimated cost of a plain walk with beam `ef` at selectivity `sel`, in exact rows."""
    return visit_cost * ef * (VISITS_BASE + VISITS_PER_SEL / max(sel, 1e-9))


def plan(matches: int, nodes: int, limit: int, ef: int, *, exact: bool = False,
         exact_below: float = 0.02, exact_max: int = 10000, filter_first_below: float = 0.0,
         filtered: bool = True, walk_share: float = WALK_EF, visit_cost: float = VISIT_COST) -> Plan:
    """Chooses the strategy for `matches` allowed nodes out of `nodes` in the graph."""
    sel = matches / nodes if nodes else 0.0
    ef = max(ef, limit)
    if exact or matches == 0 or nodes == 0:
        return Plan(EXACT, ef, sel)
    if not filtered:
        return Plan(GRAPH, ef, sel)
    if sel < exact_below or matches <= max(exact_max, 4 * ef):
        return Plan(EXACT, ef, sel)
    if sel < filter_first_below:
        # the two-hop walk needs a wider beam for the same recall: measured at 100k x 128,
        # 10%: ef 64 -> 0.947, ef 128 -> 0.983 (plain walk at ef 64: 0.977, slower)
        return Plan(FILTER_FIRST, 2 * ef, sel)
    beam = walk_ef(ef, limit, sel, walk_share)
    if matches <= walk_cost(beam, sel, visit_cost):
        return Plan(EXACT, ef, sel)
    return Plan(GRAPH, beam, sel)


@lru_cache(maxsize=256)
def graph_plan(ef: int) -> Plan:
    """The plan of an unfiltered approximate search (the common case, without the planner's cost)."""
    return Plan(GRAPH, ef, 1.0)
