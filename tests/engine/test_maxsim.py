"""The multi-vector engine (hybridsearch/engine/multivector.py, kernels/hs_maxsim.c) and the MUVERA
encoding (hybridsearch/engine/muvera.py) against float64 numpy models.

Internal: the TokenStore and the encoder are engine pieces the schema and storages wire in
later, exercised here at every SIMD level (force_simd) and with snapshot arrays no storage
would write."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hybridsearch._native import _kernels as K
from hybridsearch.bench.multivectors import colbert_like, maxsim_numpy
from hybridsearch.engine.multivector import MAX_ROWS, TokenStore
from hybridsearch.engine.muvera import Fde, FdeParams, fde_documents, fde_query
from hybridsearch.errors import BackendError, ConfigError, SchemaError
from tests.models import check_topk, maxsim_scores

METRICS = ("ip", "cosine", "l2")


def bits_of(slots, n):
    mask = np.zeros(max(n, 1) + (-max(n, 1)) % 64, dtype=bool)
    mask[list(slots)] = True
    return np.packbits(mask, bitorder="little").view(np.uint64)


def check_store(store: TokenStore, model: dict, rng, k: int = 7, wanted=None):
    """Every metric: top-k (optionally filtered) and maxsim_of against the model {slot: block}."""
    slots = sorted(model if wanted is None else set(wanted) & set(model))
    assert len(store) == len(model) and store.slots().tolist() == sorted(model)
    for s, b in model.items():
        np.testing.assert_array_equal(store.get(s), b)
    Q = rng.standard_normal((int(rng.integers(1, 40)), store.d)).astype(np.float32)
    bits = None if wanted is None else bits_of(wanted, max(list(wanted) + [0]) + 1)
    for metric in METRICS:
        ref = maxsim_scores([model[s] for s in slots], Q, metric)
        scores, got = store.maxsim_top_k(Q, k, metric, bits)
        assert scores.dtype == np.float32 and got.dtype == np.int64
        check_topk(got.tolist(), scores, slots, ref, k, tol=2e-4 * Q.shape[0])
        probe = np.array(slots[:5] + [10**6], dtype=np.int64)
        of = store.maxsim_of(probe, Q, metric)
        np.testing.assert_allclose(of[:-1], ref[:len(probe) - 1], rtol=1e-4, atol=1e-4 * Q.shape[0])
        assert np.isnan(of[-1])


@pytest.mark.parametrize("d", [1, 3, 8, 33, 128])
def test_maxsim_matches_numpy_at_every_level(simd, d, rng):
    store = TokenStore(d)
    model = {}
    for s in rng.permutation(90)[:60].tolist():  # slots written out of order
        model[s] = rng.standard_normal((int(rng.integers(1, 45)), d)).astype(np.float32)
    store.set_many(list(model), list(model.values()))
    check_store(store, model, rng)
    check_store(store, model, rng, k=200)  # k beyond the documents: all of them
    wanted = rng.choice(sorted(model), 30, replace=False).tolist() + [200]  # 200 holds nothing
    check_store(store, model, rng, wanted=wanted)
    check_store(store, model, rng, wanted=wanted[:2])  # sparse filter: scored slot by slot


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(st.tuples(st.sampled_from(["set", "set", "remove", "compact"]),
                              st.lists(st.integers(0, 40), min_size=1, max_size=6),
                              st.integers(1, 70)), min_size=1, max_size=25),
       d=st.sampled_from([2, 7, 16]), seed=st.integers(0, 2**16))
def test_writes_removes_overwrites_compaction_against_a_model(ops, d, seed):
    rng = np.random.default_rng(seed)
    store, model = TokenStore(d), {}
    for op, slots, rows in ops:
        if op == "set":
            blocks = [rng.standard_normal((int(rng.integers(1, rows + 1)), d)).astype(np.float32) for _ in slots]
            store.set_many(slots, blocks)
            model.update(zip(slots, blocks))  # a slot given twice keeps its last block
        elif op == "remove":
            assert store.remove(slots) == len(set(slots) & set(model))
            for s in slots:
                model.pop(s, None)
        else:
            store.compact()
            assert store.rows_dead == 0
    assert store.rows_live == sum(len(b) for b in model.values())
    check_store(store, model, rng)
    if model:
        check_store(store, model, rng, wanted=list(model)[::2])


def test_compaction_runs_by_itself_and_keeps_answers(rng):
    store, model = TokenStore(4), {}
    for rnd in range(6):  # rewrite every slot: the dead rows pile up until compaction
        blocks = [rng.standard_normal((30, 4)).astype(np.float32) for _ in range(100)]
        store.set_many(range(100), blocks)
        model.update(zip(range(100), blocks))
    assert store.compactions >= 1 and store.rows_dead <= store.rows_live
    check_store(store, model, rng)


def test_ties_go_to_the_lower_slot(simd, rng):
    store = TokenStore(16)
    same = rng.standard_normal((9, 16)).astype(np.float32)
    for s in (40, 7, 23, 3):  # identical blocks written in no particular order
        store.set(s, same)
    store.set(11, rng.standard_normal((5, 16)).astype(np.float32) * 0.01)
    for metric in METRICS:
        scores, slots = store.maxsim_top_k(same[:4], 4, metric)
        assert slots.tolist() == [3, 7, 23, 40] and len(set(scores.tolist())) == 1
        for wanted in ([23, 40, 11], [40, 3]):  # both filter paths
            _, slots = store.maxsim_top_k(same[:4], 2, metric, bits_of(wanted, 64))
            assert slots.tolist() == sorted(set(wanted) - {11})[:2]


def test_l2_of_equal_rows_is_exactly_zero():
    # the scan ranks by 2q.x - |x|^2; the returned distances are recomputed from q - x
    store = TokenStore(64)
    x = (np.arange(64 * 3, dtype=np.float32).reshape(3, 64) + 1000) / 7
    store.set(0, x)
    store.set(1, x + 1)
    scores, slots = store.maxsim_top_k(x, 2, "l2")
    assert slots.tolist() == [0, 1] and scores[0] == 0.0
    assert store.maxsim_of([0], x, "l2")[0] == 0.0


def test_bad_input_raises_typed_errors_and_changes_nothing(rng):
    store = TokenStore(4)
    good = rng.standard_normal((3, 4)).astype(np.float32)
    store.set(1, good)
    nan = good.copy()
    nan[1, 2] = np.nan
    for bad in (np.zeros((0, 4)), np.ones((2, 5)), np.ones(4), nan, np.zeros((2, 4)),
                np.ones((MAX_ROWS + 1, 4)), [["a"] * 4], np.full((1, 4), 1e20)):
        with pytest.raises(SchemaError):
            store.set_many([2, 3], [good, bad])
        with pytest.raises(SchemaError):
            store.maxsim_top_k(bad, 3, "ip")
    with pytest.raises(ConfigError):
        store.set(-1, good)
    with pytest.raises(ConfigError):
        store.maxsim_top_k(good, 3, "hamming")
    with pytest.raises(ConfigError):
        store.maxsim_top_k(good, -1, "ip")
    with pytest.raises(ConfigError):
        TokenStore(0)
    assert store.slots().tolist() == [1] and len(store) == 1 and store.rows_live == 3
    np.testing.assert_array_equal(store.get(1), good)
    assert store.maxsim_top_k(good, 0, "ip")[1].tolist() == []
    assert store.maxsim_top_k(good, 3, "ip", np.zeros(1, np.uint64))[1].tolist() == []
    assert TokenStore(4).maxsim_top_k(good, 3, "ip")[1].tolist() == []


def test_snapshot_round_trip_reads_in_place_and_copies_on_write(rng):
    store, model = TokenStore(8), {}
    for s in (5, 0, 9, 2):
        model[s] = rng.standard_normal((int(rng.integers(1, 20)), 8)).astype(np.float32)
        store.set(s, model[s])
    store.set(0, model[0])  # an overwrite leaves dead rows: export compacts first
    meta, arrays = store.export()
    assert meta["format"] == 1 and arrays["slots"].tolist() == [0, 2, 5, 9]
    frozen = {k: v.copy() for k, v in arrays.items()}
    for v in frozen.values():
        v.setflags(write=False)  # as a read-only mapped file gives them
    back = TokenStore.attached(dict(meta), frozen, d=8)
    check_store(back, model, rng)
    model[7] = rng.standard_normal((4, 8)).astype(np.float32)
    back.set(7, model[7])
    back.remove([5])
    del model[5]
    check_store(back, model, rng)
    with pytest.raises(BackendError, match="dimension"):
        TokenStore.attached(dict(meta), frozen, d=9)
    with pytest.raises(BackendError, match="slots end at 10"):
        TokenStore.attached(dict(meta), frozen, slot_limit=9)
    empty = TokenStore.attached(*TokenStore(3).export())
    assert len(empty) == 0 and empty.maxsim_top_k(np.ones((1, 3)), 2, "ip")[1].tolist() == []


def _damaged(meta, arrays, how, data):
    meta, arrays = dict(meta), dict(arrays)
    name = data.draw(st.sampled_from(sorted(arrays)))
    a = arrays[name]
    if how == "truncate":
        arrays[name] = a[:data.draw(st.integers(0, max(len(a) - 1, 0)))]
    elif how == "flip":
        raw = bytearray(a.tobytes())
        if raw:
            i = data.draw(st.integers(0, len(raw) - 1))
            raw[i] ^= 1 << data.draw(st.integers(0, 7))
        arrays[name] = np.frombuffer(bytes(raw), dtype=a.dtype).reshape(a.shape)
    elif how == "retype":
        arrays[name] = a.view(np.uint8) if a.dtype != np.uint8 else a.astype(np.int64)
    elif how == "drop":
        del arrays[name]
    else:
        key = data.draw(st.sampled_from(["format", "d", "docs", "rows", "slots_end"]))
        meta[key] = data.draw(st.sampled_from([None, -1, 0, 2, meta[key] + 1, "x"]))
    return meta, arrays


@settings(max_examples=150, deadline=None)
@given(how=st.sampled_from(["truncate", "flip", "retype", "drop", "meta"]), data=st.data())
def test_fuzzed_snapshots_raise_backend_error_or_load_consistently(how, data):
    rng = np.random.default_rng(7)
    store = TokenStore(3)
    store.set_many([1, 4, 6], [rng.standard_normal((n, 3)).astype(np.float32) for n in (2, 5, 1)])
    meta, arrays = _damaged(*store.export(), how, data)
    try:
        back = TokenStore.attached(meta, arrays)
    except BackendError:
        return
    # what loads is a consistent store: its answers agree with its own blocks
    model = {s: back.get(s) for s in back.slots().tolist()}
    check_store(back, model, rng)


# --------------------------------------------------------------------------- MUVERA FDE
def fde_model(blocks, Q, fde: Fde, metric="ip"):
    """The encodings written plainly, one block, repetition and partition at a time, from the
    encoder's own random matrices (the model checks the arithmetic, not the randomness)."""
    p, B, dp = fde.params, fde.B, fde.dp

    def prep(b):
        b = np.asarray(b, dtype=np.float64)
        return b / np.linalg.norm(b, axis=1, keepdims=True) if metric == "cosine" else b

    def encode(b, is_query):
        b = prep(b)
        out = []
        for r in range(p.reps):
            G = fde.simhash[:, r * p.k_sim:(r + 1) * p.k_sim].astype(np.float64)
            codes = [sum(1 << j for j in range(p.k_sim) if x @ G[:, j] > 0) for x in b]
            S = fde.proj[:, r * dp:(r + 1) * dp].astype(np.float64) if fde.proj is not None else np.eye(p.dim)
            for part in range(B):
                mine = [i for i, c in enumerate(codes) if c == part]
                if mine:
                    v = b[mine].sum(0) if is_query else b[mine].mean(0)
                elif is_query:
                    v = np.zeros(p.dim)
                else:
                    v = b[min(range(len(b)), key=lambda i: (bin(codes[i] ^ part).count("1"), i))]
                out.append(v @ S)
        out = np.concatenate(out)
        if fde.sketch is not None:
            where, sign = fde.sketch
            res = np.zeros(p.final_dim)
            np.add.at(res, where, out * sign)
            out = res
        return out

    return np.array([encode(b, False) for b in blocks]), encode(Q, True)


@settings(max_examples=20, deadline=None)
@given(k_sim=st.integers(0, 4), d_proj=st.sampled_from([None, 3]), reps=st.integers(1, 3),
       final=st.sampled_from([None, 5]), metric=st.sampled_from(["ip", "cosine"]), seed=st.integers(0, 99))
def test_fde_against_a_plain_model(k_sim, d_proj, reps, final, metric, seed):
    rng = np.random.default_rng(seed)
    d = 6
    params = FdeParams(d, k_sim=k_sim, d_proj=d_proj, reps=reps, final_dim=final, seed=seed)
    blocks = [rng.standard_normal((int(rng.integers(1, 9)), d)).astype(np.float32) for _ in range(7)]
    Q = rng.standard_normal((4, d)).astype(np.float32)
    docs, q = fde_documents(blocks, params, metric), fde_query(Q, params, metric)
    assert docs.shape == (7, params.out_dim) and q.shape == (params.out_dim,) and docs.dtype == np.float32
    mdocs, mq = fde_model(blocks, Q, Fde(params), metric)
    np.testing.assert_allclose(docs, mdocs, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(q, mq, rtol=1e-4, atol=1e-4)


def test_fde_is_deterministic_and_one_partition_is_a_mean():
    rng = np.random.default_rng(3)
    blocks = [rng.standard_normal((n, 5)).astype(np.float32) for n in (1, 4, 9)]
    p = FdeParams(5, k_sim=3, d_proj=4, reps=2, seed=11)
    np.testing.assert_array_equal(Fde(p).documents(blocks), Fde(p).documents(blocks))
    assert not np.allclose(Fde(p).documents(blocks), Fde(FdeParams(5, k_sim=3, d_proj=4, reps=2, seed=12)).documents(blocks))
    # one partition, no projection: <sum of query rows, mean of document rows>
    one = Fde(FdeParams(5, k_sim=0, d_proj=None, reps=1))
    Q = rng.standard_normal((3, 5)).astype(np.float32)
    got = one.documents(blocks, "ip") @ one.query(Q, "ip")
    np.testing.assert_allclose(got, [Q.astype(np.float64).sum(0) @ b.astype(np.float64).mean(0) for b in blocks],
                               rtol=1e-5, atol=1e-5)
    with pytest.raises(ConfigError):
        FdeParams(5, k_sim=11)
    with pytest.raises(SchemaError):
        one.documents([np.ones((2, 4))])


def test_fde_candidates_then_exact_rescoring_reach_recall_095():
    """5,000 documents x 20..60 tokens x 128 d (200 topics, 8 per document, noise 1.0), 40
    queries of 32 tokens; default FdeParams (k_sim=4, d_proj=16, reps=20: 5,120 dimensions);
    candidates: the exact top-200 by FDE dot product; rescored by exact MaxSim (cosine).
    Truth: exhaustive MaxSim in numpy."""
    docs, queries = colbert_like(5000, 40, dim=128, topics=200, per_doc=8, noise=1.0, seed=1)
    store = TokenStore(128)
    store.set_many(range(len(docs)), docs)
    params = FdeParams(128)
    D = fde_documents(docs, params)
    recalls = []
    for Q in queries:
        truth = np.argsort(-maxsim_numpy(docs, Q, "cosine", np.float32), kind="stable")[:10]
        cand = np.argsort(-(D @ fde_query(Q, params)))[:200]
        top = cand[np.argsort(-store.maxsim_of(cand, Q, "cosine"), kind="stable")[:10]]
        recalls.append(len(set(top.tolist()) & set(truth.tolist())) / 10)
    assert np.mean(recalls) >= 0.95, np.mean(recalls)
