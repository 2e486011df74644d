"""The hnsw storage's FDE graphs in its snapshot, damaged: truncated files and flipped bits in
the FDE records are refused by the checksums (BackendError at open); damage behind a valid
checksum (the snapshot rewritten through the Journal, as a writer's bug would leave it) is
refused by the attach's checks (BackendError naming the field) when it is structural (headers,
shapes, links, the node set); saved encodings that differ from the documents' (another seed, a
sign flipped by rounding, a changed row) rebuild the graph from the tokens, as it is derived
data; for random changes to the encodings and links, the reopened collection still scores every
hit with exact MaxSim (the graph only chooses candidates), never a crash or a wrong score.
"""
# internal: the snapshot's records and arrays (rewritten with valid checksums through
# engine.persist.Journal) are not reachable through DocumentArray, which only writes good ones
import os
import random
from typing import Optional

import numpy as np
import pytest

import hybridsearch as hs
from hybridsearch.bench.multivectors import colbert_like
from hybridsearch.document import schema_of
from hybridsearch.engine.muvera import Fde, FdeParams, encoder, fde_documents
from hybridsearch.engine.persist import Journal
from tests.models import maxsim_scores


class Page(hs.Document):
    tag: hs.Keyword = "a"
    colbert: Optional[hs.MultiVector[8]] = None


DOCS, QUERIES = colbert_like(120, 4, dim=8, tokens=(3, 8), query_tokens=4, topics=15, seed=9)
HELD = {f"d{i:03d}": b for i, b in enumerate(DOCS) if i % 5}


def open_at(path):
    return hs.DocumentArray(Page, storage="hnsw", path=path, exact_max=0, metric="cosine")


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("fde") / "c"
    with open_at(path) as da:
        da.extend([{"id": f"d{i:03d}", "colbert": b if i % 5 else None} for i, b in enumerate(DOCS)])
    return str(path)


def copy_of(saved: str, tmp_path) -> str:
    dst = tmp_path / "c"
    dst.mkdir(parents=True)
    for name in os.listdir(saved):
        with open(os.path.join(saved, name), "rb") as f, open(dst / name, "wb") as g:
            g.write(f.read())
    return str(dst)


def snapshot_file(path: str) -> str:
    snaps = [n for n in os.listdir(path) if n.startswith("snap")]
    assert len(snaps) == 1, os.listdir(path)
    return os.path.join(path, snaps[0])


def assert_exact_scores(path: str) -> None:
    """Opens and checks that every hit's score is its exact MaxSim, the hits are documents
    holding the field, best first."""
    with open_at(path) as da:
        ids = sorted(HELD)
        for Q in QUERIES:
            r = da.find(vector={"colbert": Q}, limit=10)
            assert set(r.ids) <= set(HELD) and list(r.scores) == sorted(r.scores, reverse=True)
            ref = dict(zip(ids, maxsim_scores([HELD[i] for i in ids], Q, "cosine").tolist()))
            np.testing.assert_allclose(r.scores, [ref[i] for i in r.ids], rtol=1e-4, atol=1e-4)


def test_the_saved_collection_maps_its_graph(saved, tmp_path):
    with open_at(copy_of(saved, tmp_path)) as da:
        assert da.stats()["fde_graphs_built"] == 0 and da.stats()["fde_graph_nodes"] == {"colbert": len(HELD)}
    assert_exact_scores(copy_of(saved, tmp_path / "again"))


def fde_span(data: bytes) -> tuple:
    """[start, end) of the snapshot's bytes from the first FDE array record to the end record."""
    start = data.find(b'"name": "index/fde/')
    assert start > 0
    return start, len(data) - 32


def test_truncated_snapshots_raise_backend_error(saved, tmp_path):
    path = copy_of(saved, tmp_path)
    snap = snapshot_file(path)
    data = open(snap, "rb").read()
    start, end = fde_span(data)
    for n in random.Random(1).sample(range(start, len(data)), 15):
        with open(snap, "wb") as f:
            f.write(data[:n])
        with pytest.raises(hs.BackendError):
            open_at(path)


def test_bit_flips_in_the_fde_records_raise_backend_error(saved, tmp_path):
    path = copy_of(saved, tmp_path)
    snap = snapshot_file(path)
    data = open(snap, "rb").read()
    start, end = fde_span(data)
    rng = random.Random(2)
    for _ in range(25):
        b = bytearray(data)
        b[rng.randrange(start, end)] ^= 1 << rng.randrange(8)
        with open(snap, "wb") as f:
            f.write(bytes(b))
        with pytest.raises(hs.BackendError):
            open_at(path)


def rewrite(path: str, damage) -> None:
    """Loads the snapshot, lets `damage(meta, arrays)` change copies of it, and writes it back
    with valid checksums."""
    j = Journal(path, schema_of(Page))
    try:
        snap, ops = j.load()
        assert not ops
        meta = snap.meta
        arrays = {k: np.array(v) for k, v in snap.arrays.items()}
        snap.release()
        damage(meta, arrays)
        j.snapshot_arrays(meta, arrays)
    finally:
        j.close()


def _fde(meta):
    return meta["index"]["fde_graphs"]["colbert"]


def _first_node(a):
    return int(np.flatnonzero(a["index/fde/colbert/graph/level"] >= 0)[0])


DAMAGES = {
    "fde-meta-not-a-dict": lambda m, a: m["index"].__setitem__("fde_graphs", {"colbert": 3}),
    "unknown-field": lambda m, a: m["index"]["fde_graphs"].__setitem__("nope", _fde(m)),
    "params-bad": lambda m, a: _fde(m)["params"].__setitem__("k_sim", 99),
    "params-other-dim": lambda m, a: _fde(m)["params"].__setitem__("dim", 9),
    "params-other-reps": lambda m, a: _fde(m)["params"].__setitem__("reps", 19),
    "params-huge": lambda m, a: _fde(m)["params"].update(reps=10**15, k_sim=10, d_proj=10**6),
    "params-extra-key": lambda m, a: _fde(m)["params"].__setitem__("extra", 1),
    "graph-meta-missing": lambda m, a: _fde(m).pop("graph"),
    "graph-count": lambda m, a: _fde(m)["graph"].__setitem__("count", _fde(m)["graph"]["count"] + 1),
    "block-missing": lambda m, a: a.pop("index/fde/colbert/block"),
    "block-short": lambda m, a: a.__setitem__("index/fde/colbert/block", a["index/fde/colbert/block"][:-1]),
    "block-float64": lambda m, a: a.__setitem__("index/fde/colbert/block",
                                                a["index/fde/colbert/block"].astype(np.float64)),
    "links-missing": lambda m, a: a.pop("index/fde/colbert/graph/links0"),
    "link-out-of-range": lambda m, a: a["index/fde/colbert/graph/links0"].__setitem__(
        (_first_node(a), 1), 10**6),
    "node-dropped": lambda m, a: a["index/fde/colbert/graph/level"].__setitem__(
        int(np.flatnonzero(a["index/fde/colbert/graph/level"] == 0)[-1]), -1),
    "node-added": lambda m, a: a["index/fde/colbert/graph/level"].__setitem__(0, 0),  # d000 holds no tokens
}


def _sign_flipped(meta, arrays):
    """Every saved encoding replaced by the document's encoding with one SimHash hyperplane's
    signs flipped: what a batch-dependent rounding of the sign test left in the block (a
    token near the hyperplane changing partition), in every row."""
    a = arrays["index/fde/colbert/graph/level"]
    block = arrays["index/fde/colbert/block"]
    flipped = Fde(FdeParams(**_fde(meta)["params"]))  # a private encoder, not the cached one
    flipped.simhash = flipped.simhash.copy()
    flipped.simhash[:, 0] *= -1
    flipped.simhash64 = flipped.simhash.astype(np.float64)
    nodes = np.flatnonzero(a >= 0)
    by_slot = dict(zip(range(len(DOCS)), DOCS))  # slots follow the insertion order (no deletes)
    blocks = [by_slot[s] for s in nodes.tolist()]
    np.testing.assert_allclose(Fde(flipped.params).documents(blocks, "cosine"), block[nodes],
                               rtol=1e-4, atol=1e-5)  # the saved rows are these documents'
    rows = flipped.documents(blocks, "cosine")
    assert not np.allclose(rows, block[nodes], rtol=1e-4, atol=1e-5)  # the damage is real
    block[nodes] = rows


# changes to a sound graph that make it not this collection's: the open builds it again from
# the tokens (stats()["fde_graphs_built"] == 1) instead of refusing a healthy collection
REBUILT = {
    "encodings-sign-flipped": _sign_flipped,
    "params-other-seed": lambda m, a: _fde(m)["params"].__setitem__("seed", 1),
    "block-row-changed": lambda m, a: a["index/fde/colbert/block"].__setitem__(_first_node(a), 0.5),
    "block-nan": lambda m, a: a["index/fde/colbert/block"].__setitem__((_first_node(a), 3), np.nan),
}


@pytest.mark.parametrize("name", sorted(REBUILT))
def test_encodings_that_differ_from_the_tokens_are_rebuilt(saved, tmp_path, name):
    path = copy_of(saved, tmp_path)
    rewrite(path, REBUILT[name])
    with open_at(path) as da:
        st = da.stats()
        assert st["fde_graphs_built"] == 1 and st["fde_graph_nodes"] == {"colbert": len(HELD)}
        ids = sorted(HELD)
        for Q in QUERIES:
            r = da.find(vector={"colbert": Q}, limit=10)
            ref = maxsim_scores([HELD[i] for i in ids], Q, "cosine")
            order = np.argsort(-ref, kind="stable")[:10]
            assert set(r.ids) == {ids[j] for j in order}
            np.testing.assert_allclose(r.scores, ref[order], rtol=1e-4, atol=1e-4)
    assert_exact_scores(path)  # closed without a write: the rebuilt graph was saved
    with open_at(path) as da:
        assert da.stats()["fde_graphs_built"] == 0


def test_a_document_encodes_alike_in_any_batch():
    """Tokens lying on SimHash hyperplanes (their product with the direction is at rounding
    level): each document's encoding alone equals its row in one batch of all, to the attach's
    spot-check tolerance. The sign test used to round in float32, with a batch-shape-dependent
    result, so a saved block failed the spot check of a healthy collection."""
    params = FdeParams(64)
    S = encoder(params).simhash.astype(np.float64)
    rng = np.random.default_rng(0)
    blocks = []
    for _ in range(200):
        t = rng.standard_normal((4, 64))
        for r in range(4):
            s = S[:, rng.integers(S.shape[1])]
            t[r] -= (t[r] @ s) / (s @ s) * s
        blocks.append(t.astype(np.float32))
    for metric in ("ip", "cosine"):
        together = fde_documents(blocks, params, metric)
        for size in (1, 7, 64):
            apart = np.concatenate([fde_documents(blocks[i:i + size], params, metric)
                                    for i in range(0, len(blocks), size)])
            np.testing.assert_allclose(apart, together, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", sorted(DAMAGES))
def test_damage_behind_valid_checksums_is_refused(saved, tmp_path, name):
    path = copy_of(saved, tmp_path)
    rewrite(path, lambda m, a: None)
    assert_exact_scores(path)  # rewritten undamaged: opens and answers
    rewrite(path, DAMAGES[name])
    with pytest.raises(hs.BackendError, match="damaged|snapshot"):
        open_at(path)


def test_random_damage_to_links_and_encodings_is_refused_or_harmless(saved, tmp_path):
    """Random bytes of the FDE arrays changed: either BackendError at open, or every hit still
    carries its exact MaxSim (only which candidates the walk finds may change)."""
    rng = random.Random(4)
    refused = 0
    for round_ in range(12):
        path = copy_of(saved, tmp_path / str(round_))

        def damage(meta, arrays):
            names = sorted(k for k in arrays if k.startswith("index/fde/"))
            for _ in range(rng.choice([1, 2, 8])):
                raw = arrays[rng.choice(names)].view(np.uint8).reshape(-1)
                if len(raw):
                    raw[rng.randrange(len(raw))] = rng.randrange(256)

        rewrite(path, damage)
        try:
            assert_exact_scores(path)
        except hs.BackendError:
            refused += 1
    assert refused < 12  # some damage lands where it is harmless (a float's low bits)
