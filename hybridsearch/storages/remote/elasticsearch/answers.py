"""Reading the engines' answers: what a failed bulk item, a failed by-query run or an error
body says, and answers that came back successful but incomplete; and what an index of several
shards on several nodes asks of the client (`spread`, `failover_retries`).

An index spread over several nodes answers a search from one copy of each shard. When no copy
of a shard can answer (its node left and no replica was promoted yet, a shard failed), the
engines still answer 200 with `_shards.failed` > 0 and the hits of the other shards; an `_mget`
answers a document of such a shard with an `error` instead of its source. Taken as they are,
those answers would be silently partial: a search missing a shard's best hits, a get reporting
a stored document as absent. `whole` turns them into `PartialAnswer`, which the storage treats
like a 503 (resent with backoff, then `hs.BackendError`)."""
from __future__ import annotations

from typing import Optional, Union

# what a partial answer counts as: "unavailable, ask again" (remote/base.py RETRY_STATUS)
PARTIAL_STATUS = 503


class PartialAnswer(Exception):
    """A successful answer without every shard (search, count) or document (mget) in it."""


def spread(shards: int) -> dict:
    """The search parameters of an index of `shards` primary shards. Each shard scores BM25 with
    its own term statistics unless asked for the index's (dfs_query_then_fetch: one more round
    trip per shard), and then a document's score, and so the ranking, would depend on the shard
    its id hashed to: several shards search as one."""
    return {"search_type": "dfs_query_then_fetch"} if shards > 1 else {}


def spread_of(params: dict, body: dict) -> dict:
    """`spread`'s parameters for one search body: none beside Elasticsearch's top-level `knn`,
    whose search type the engine picks itself (it refuses one: "cannot set [search_type] when
    using [knn] search"); its knn search has a DFS phase of its own, and the BM25 of a hybrid
    query's lexical clause there is the index-wide one too."""
    return {} if "knn" in body else params


def failover_retries(hosts: Union[str, list]) -> int:
    """Resends the client makes itself after a connection error: one to each other node of a
    list of hosts (the client's node pool skips a node it saw fail), none with a single host
    (remote/base.py's own retries cover a busy node)."""
    return len(hosts) - 1 if isinstance(hosts, (list, tuple)) else 0


def _shard_failure(res: dict) -> Optional[str]:
    # reads only: a write's _shards counts the copies it reached, and a replica left unassigned
    # (its node gone) is not a failure of a write the primary acknowledged
    shards = res.get("_shards")
    if not isinstance(shards, dict) or not ("hits" in res or "count" in res):
        return None
    total, failed = int(shards.get("total", 0)), int(shards.get("failed", 0))
    answered = int(shards.get("successful", 0)) + int(shards.get("skipped", 0))
    if not failed and answered >= total:
        return None
    why = ""
    for f in shards.get("failures") or []:
        reason = f.get("reason")
        why = f": {reason.get('type', '')} {reason.get('reason', '')}" if isinstance(reason, dict) else f": {reason}"
        break
    return f"{total - answered} of {total} shards did not answer{why}"


def incomplete(res) -> Optional[str]:
    """Why an answer is partial (a search / count missing shards, an _msearch with such a
    search, an _mget with a document that could not be read), or None when it is whole."""
    if not isinstance(res, dict):
        res = getattr(res, "body", res)
        if not isinstance(res, dict):
            return None
    why = _shard_failure(res)
    if why:
        return why
    for r in res.get("responses") or []:
        why = isinstance(r, dict) and _shard_failure(r)
        if why:
            return why
    for d in res.get("docs") or []:
        if isinstance(d, dict) and "error" in d:
            err = d["error"]
            reason = f"{err.get('type', '')} {err.get('reason', '')}" if isinstance(err, dict) else err
            return f"document {d.get('_id')!r} could not be read: {reason}"
    return None


def whole(fn, *args, **kwargs):
    """fn(*args, **kwargs) -> its answer, or PartialAnswer when the answer is incomplete."""
    res = fn(*args, **kwargs)
    why = incomplete(res)
    if why:
        raise PartialAnswer(why)
    return res


def bulk_reasons(failed: list) -> str:
    """The first few (id, bulk item) failures as "'id': type reason; ..."."""
    return "; ".join(f"{i!r}: {info.get('error', {}).get('type', '')} "
                     f"{info.get('error', {}).get('reason', info.get('status'))}" for i, info in failed[:5])


def error_answer(e: BaseException) -> Optional[dict]:
    """The JSON body of an error answer of either client (elasticsearch: ApiError.body,
    opensearch-py: TransportError.info), None for anything else."""
    for attr in ("body", "info"):
        v = getattr(e, attr, None)
        if isinstance(v, dict):
            return v
    return None


def failure_reason(failures: list) -> str:
    """What a by-query answer's `failures` say: how many, and the first one's cause."""
    first = failures[0]
    cause = first.get("cause") or first.get("reason") or first
    if isinstance(cause, dict):
        cause = f"{cause.get('type', '')} {cause.get('reason', '')}".strip()
    return f"{len(failures)} failures, the first on document {first.get('id')!r}: {cause}"


# what the reason of an error says when its query has more clauses than the engine takes
# (Lucene's max clause count, indices.query.bool.max_clause_count): "too_many_clauses" /
# "too_many_nested_clauses" counting the tree, "failed to create query" building one bool
TOO_MANY_CLAUSES = "maxClauseCount"


def error_reason(body: dict) -> str:
    """The reason of an error body, with its root causes' type and reason when they say more (a
    search failing on every shard only says "all shards failed" at the top)."""
    err = body.get("error", {})
    if not isinstance(err, dict):
        return str(err or body or "")
    reason = err.get("reason") or ""
    causes = [c for c in err.get("root_cause") or [] if isinstance(c, dict)]
    extra = "; ".join(f"{c.get('type', '')} {c.get('reason', '')}".strip() for c in causes[:2])
    return f"{reason} ({extra})" if extra and extra not in reason else (reason or str(body or ""))
