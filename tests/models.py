"""Plain-Python reference models the suite checks the storages against."""
import numpy as np


def matches(doc: dict, flt: dict) -> bool:
    """Reference semantics of the filter language, written independently of hybridsearch.query.filters."""
    for key, cond in flt.items():
        if key == "$and":
            if not all(matches(doc, f) for f in cond):
                return False
        elif key == "$or":
            if not any(matches(doc, f) for f in cond):
                return False
        elif key == "$not":
            if matches(doc, cond):
                return False
        else:
            value = doc.get(key)
            ops = cond if isinstance(cond, dict) and any(str(k).startswith("$") for k in cond) else {"$eq": cond}
            for op, arg in ops.items():
                if not _field_op(value, op, arg):
                    return False
    return True


def _field_op(value, op, arg) -> bool:
    if op == "$exists":
        return (value is not None) == arg
    if op == "$ne":
        return not _field_op(value, "$eq", arg)
    if op == "$nin":
        return not _field_op(value, "$in", arg)
    if value is None:
        return False
    if op == "$eq":
        return value == arg
    if op == "$in":
        return any(value == a for a in arg)
    if op == "$gt":
        return value > arg
    if op == "$gte":
        return value >= arg
    if op == "$lt":
        return value < arg
    if op == "$lte":
        return value <= arg
    raise AssertionError(op)


def exact_scores(X: np.ndarray, q: np.ndarray, metric: str) -> np.ndarray:
    """Scores in float64 exactly as API.md defines them (higher is better)."""
    X = X.astype(np.float64)
    q = q.astype(np.float64)
    if metric == "ip":
        return X @ q
    if metric == "cosine":
        nx = np.linalg.norm(X, axis=1)
        nq = np.linalg.norm(q)
        with np.errstate(invalid="ignore", divide="ignore"):
            s = (X @ q) / (nx * nq)
        return np.nan_to_num(s, nan=0.0)
    return -np.linalg.norm(X - q, axis=1)


def check_topk(got_ids, got_scores, ids, ref_scores, k, tol=1e-4):
    """Asserts got is an exact top-k of ref_scores (indexed like ids), up to ties within tol."""
    ref_scores = np.asarray(ref_scores)
    expected_n = min(k, len(ids))
    assert len(got_ids) == expected_n
    assert len(set(got_ids)) == len(got_ids), "duplicate ids in results"
    pos = {id_: i for i, id_ in enumerate(ids)}
    got_ref = np.array([ref_scores[pos[i]] for i in got_ids])
    # every returned score is the true score of that document
    np.testing.assert_allclose(got_scores, got_ref, rtol=tol, atol=tol)
    # sorted best first
    assert np.all(np.diff(np.asarray(got_scores)) <= tol)
    if expected_n == 0:
        return
    # nothing left out scores better than the worst returned one (beyond ties)
    kth = np.sort(ref_scores)[::-1][expected_n - 1]
    assert got_ref.min() >= kth - tol * max(1.0, abs(kth))
