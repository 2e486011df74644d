"""Schema changes on reopen (API.md section 2) on the storages that keep their schema with their
files: memory and hnsw with `path=`, sqlite. Public API only.

A collection written under one Document class is reopened under another drawn from a pool of
field variants (added with a default, removed, re-added, a default changed, Optional either way,
unindexed `str` becoming hs.Text); each step is checked against a plain-dict model: every document
reads back as the model says (removed keys gone, added keys at their defaults, values written
later where they were written), vector finds are the numpy brute-force top-k of the live
documents (the vectors untouched), text finds on every text field (those added later included)
and keyword filters return what the model's tokens and values say. Refused changes are a
ConfigError naming the field that leaves every file byte for byte as it was; the history is in
stats(); a writer killed while it evolves leaves the old or the new collection.
"""
import datetime
import gc
import os
import random
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Optional

import numpy as np
import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hybridsearch as hs
from tests.models import check_topk, english_tokens, exact_scores

ROOT = Path(__file__).resolve().parents[2]
STORAGES = ["memory", "hnsw", "sqlite"]
ALL = 10_000  # a text find's limit above any collection here: every match
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon"]

# field -> its variants (annotation, default); moving between the variants of a field is allowed
# (a default changed, Optional either way with a default), and so is `note` going from unindexed
# str (variant 0) to hs.Text (variant 1): never back, which is a change of kind
POOL = {
    "note": [(str, "plain note"), (hs.Text, "plain note")],
    "body": [(hs.Text, ""), (hs.Text, "alpha words")],
    "tag": [(hs.Keyword, "k1"), (Optional[hs.Keyword], None)],
    "count": [(int, 7), (int, -2)],
    "price": [(Optional[float], None), (float, 1.5)],
    "flag": [(bool, True), (bool, False)],
    "w": [(Optional[hs.Vector[3]], None)],
}
TEXT_FIELDS = {("note", 1), ("body", 0), ("body", 1)}


def model_of(choice: dict, name: str = "Evolved"):
    """A Document class: title and v always, plus the pool fields `choice` names (field -> variant)."""
    fields = {"title": (hs.Text, ...), "v": (hs.Vector[4], ...)}
    for f in POOL:  # a fixed declaration order
        if f in choice:
            ann, default = POOL[f][choice[f]]
            fields[f] = (ann, default)
    return pydantic.create_model(name, __base__=hs.Document, **fields)


BASE = model_of({"note": 0, "tag": 0, "count": 0}, "Base")


def where(storage: str, tmp: Path) -> Path:
    return tmp / "c.db" if storage == "sqlite" else tmp / "c"


def open_da(storage: str, path: Path, model, **kw):
    da = hs.DocumentArray(model, storage=storage, path=path, **kw)
    len(da)  # opened now, whatever the open mode
    return da


def files(tmp: Path) -> dict:
    """Every file under tmp, name -> bytes (the lock files too: nothing may change)."""
    out = {}
    for root, _, names in os.walk(tmp):
        for n in names:
            p = os.path.join(root, n)
            with open(p, "rb") as f:
                out[os.path.relpath(p, tmp)] = f.read()
    return out


# ------------------------------------------------------------------ the model
def random_value(field: str, variant: int, rng: random.Random):
    ann, _ = POOL[field][variant]
    if field in ("note", "body"):
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 3)))
    if field == "tag":
        return rng.choice(["x", "y", None] if variant == 1 else ["x", "y"])
    if field == "count":
        return rng.randint(-5, 5)
    if field == "price":
        return rng.choice([None, 2.25, -1.0]) if variant == 0 else rng.choice([2.25, -1.0])
    if field == "flag":
        return rng.random() < 0.5
    if field == "w":
        return None if rng.random() < 0.3 else np.asarray([rng.gauss(0, 1) for _ in range(3)], dtype=np.float32)
    raise AssertionError(field)


def random_doc(i: str, choice: dict, rng: random.Random) -> dict:
    d = {"id": i, "title": " ".join(rng.choice(WORDS) for _ in range(2)),
         "v": np.asarray([rng.gauss(0, 1) for _ in range(4)], dtype=np.float32)}
    for f, variant in choice.items():
        d[f] = random_value(f, variant, rng)
    return d


def evolve_model(docs: dict, old: dict, new: dict) -> None:
    """The model of a schema change: removed keys go, added keys take their default, a kept
    field's None takes the default of a variant that is not Optional."""
    for d in docs.values():
        for f in old:
            if f not in new:
                del d[f]
        for f, variant in new.items():
            ann, default = POOL[f][variant]
            if f not in old:
                d[f] = default
            elif d[f] is None and default is not None and type(None) not in getattr(ann, "__args__", ()):
                d[f] = default


def plain(v):
    return v.tolist() if isinstance(v, np.ndarray) else v


def check(da, docs: dict, choice: dict, rng: random.Random, storage: str) -> None:
    got = {d.id: d.model_dump() for d in da}
    assert sorted(got) == sorted(docs)
    for i, want in docs.items():
        g = got[i]
        assert set(g) == set(want), (i, set(g) ^ set(want))
        for k, v in want.items():
            assert plain(g[k]) == plain(v) and type(plain(g[k])) is type(plain(v)), (i, k, g[k], v)
    if not docs:
        return
    ids = list(docs)
    X = np.stack([docs[i]["v"] for i in ids])
    for _ in range(2):
        q = np.asarray([rng.gauss(0, 1) for _ in range(4)], dtype=np.float32)
        ref = exact_scores(X, q, "cosine")
        for exact in (True, False):  # the carried graph (hnsw) is walked, with a beam wider than the collection
            res = da.find({"v": q}, limit=5, exact=exact, ef=200)
            check_topk(res.ids, res.scores, ids, ref, 5)
    if "w" in choice:
        have = [i for i in ids if docs[i]["w"] is not None]
        q = np.asarray([rng.gauss(0, 1) for _ in range(3)], dtype=np.float32)
        res = da.find({"w": q}, limit=3, exact=True)
        if have:
            check_topk(res.ids, res.scores, have, exact_scores(np.stack([docs[i]["w"] for i in have]), q,
                                                                "cosine"), 3)
        else:
            assert res.ids == []
    for field in ["title"] + [f for f, v in choice.items() if (f, v) in TEXT_FIELDS]:
        word = rng.choice(WORDS)
        want = {i for i, d in docs.items() if english_tokens(word)[0] in english_tokens(d[field])}
        got_ids = set(da.find(text=word, text_fields={field: 1.0}, limit=ALL).ids)
        assert got_ids == want, (field, word)
    if "tag" in choice:
        for value in ("x", "k1"):
            want = {i for i, d in docs.items() if d["tag"] == value}
            assert set(da.find(filter={"tag": value}, limit=None).ids) == want


# ------------------------------------------------------------------ property test
@st.composite
def schema_steps(draw):
    """A sequence of pool choices, each reachable from the one before it."""
    steps, current = [], {"note": 0, "tag": 0, "count": 0}
    for _ in range(draw(st.integers(1, 4))):
        nxt = {}
        for f, variants in POOL.items():
            if draw(st.booleans()):
                v = draw(st.integers(0, len(variants) - 1))
                if f == "note" and current.get("note") == 1:
                    v = 1  # hs.Text back to str is a change of kind (refused; tested below)
                nxt[f] = v
        writes = draw(st.integers(0, 4))
        steps.append((nxt, writes))
        current = nxt
    return steps


@pytest.mark.parametrize("storage", STORAGES)
@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(steps=schema_steps(), seed=st.integers(0, 2**32 - 1))
def test_documents_read_back_as_the_model_says_through_random_schema_changes(storage, steps, seed, tmp_path_factory):
    rng = random.Random(seed)
    tmp = tmp_path_factory.mktemp("evolve")
    path = where(storage, tmp)
    choice = {"note": 0, "tag": 0, "count": 0}
    docs = {}
    with open_da(storage, path, BASE) as da:
        batch = [random_doc(f"d{j}", choice, rng) for j in range(30)]
        da.extend([BASE(**d) for d in batch])
        docs.update((d["id"], d) for d in batch)
        check(da, docs, choice, rng, storage)
    n = 30
    for k, (nxt, writes) in enumerate(steps):
        model = model_of(nxt, f"Step{k}")
        evolve_model(docs, choice, nxt)
        choice = nxt
        da = open_da(storage, path, model)
        check(da, docs, choice, rng, storage)
        for _ in range(writes):  # more documents, an overwrite and a delete under this schema
            batch = [random_doc(f"d{n + j}", choice, rng) for j in range(rng.randint(1, 5))]
            if docs and rng.random() < 0.5:
                batch.append(random_doc(rng.choice(sorted(docs)), choice, rng))
            n += len(batch)
            da.extend([model(**d) for d in batch])
            docs.update((d["id"], d) for d in batch)
            if docs and rng.random() < 0.3:
                gone = rng.choice(sorted(docs))
                da.delete([gone])
                del docs[gone]
        check(da, docs, choice, rng, storage)
        history = da.stats()["schema_history"]
        assert sorted(map(tuple, history[-1]["fields"])) == sorted(
            (f, *rest) for f, *rest in model_of(choice).__hs_schema__.fingerprint())
        da.close()
    with open_da(storage, path, model_of(choice, "Again")) as da:  # close and reopen: nothing changes
        check(da, docs, choice, rng, storage)
        assert len(da.stats()["schema_history"]) == len(history)


# ------------------------------------------------------------------ refusals
class Filled(hs.Document):
    title: hs.Text
    v: hs.Vector[4]
    note: str = "plain note"
    tag: hs.Keyword = "k1"
    count: int = 7
    price: Optional[float] = None


def _fields(**changes):
    fields = {"title": (hs.Text, ...), "v": (hs.Vector[4], ...), "note": (str, "plain note"),
              "tag": (hs.Keyword, "k1"), "count": (int, 7), "price": (Optional[float], None)}
    fields.update(changes)
    return pydantic.create_model("Changed", __base__=hs.Document, **{k: v for k, v in fields.items() if v})


REFUSED = {
    "kind": (_fields(count=(float, 7.0)), "count", "float field"),
    "kind-text-to-str": (_fields(title=(str, ...)), "title", "cannot change kind"),
    "kind-keyword-to-int": (_fields(tag=(int, 0)), "tag", "int field"),
    "dimension": (_fields(v=(hs.Vector[5], ...)), "v", "5 dimensions"),
    "required-without-default": (_fields(extra=(int, ...)), "extra", "no default"),
    "required-vector": (_fields(w=(hs.Vector[3], ...)), "w", "required vector"),
    "vector-with-default": (_fields(w=(Optional[hs.Vector[3]], [1.0, 0.0, 0.0])), "w", "default must be None"),
    "optional-to-required": (_fields(price=(float, ...)), "price", "Optional"),
}


def _filled(storage: str, tmp: Path) -> Path:
    path = where(storage, tmp)
    rng = np.random.default_rng(1)
    with open_da(storage, path, Filled) as da:
        da.extend([Filled(id=f"d{i}", title=f"{WORDS[i % 5]} doc", v=rng.standard_normal(4).astype(np.float32),
                          price=None if i % 2 else float(i)) for i in range(40)])
    return path


@pytest.mark.parametrize("case", sorted(REFUSED))
@pytest.mark.parametrize("storage", STORAGES)
def test_a_refused_change_names_the_field_and_leaves_the_files_as_they_were(storage, case, tmp_path):
    path = _filled(storage, tmp_path)
    before = files(tmp_path)
    model, field, what = REFUSED[case]
    with pytest.raises(hs.ConfigError, match=what) as e:
        open_da(storage, path, model)
    assert f"Changed.{field}" in str(e.value)
    assert files(tmp_path) == before
    with open_da(storage, path, Filled) as da:  # the old schema still opens it, every document there
        assert len(da) == 40 and da["d2"].price == 2.0


def test_a_metric_change_is_refused_where_the_graph_was_built_for_the_metric(tmp_path):
    path = _filled("hnsw", tmp_path)
    before = files(tmp_path)
    with pytest.raises(hs.ConfigError, match="metric='cosine'") as e:
        open_da("hnsw", path, _fields(extra=(int, 1)), metric="l2")
    assert "Changed.v" in str(e.value)
    assert files(tmp_path) == before


@pytest.mark.parametrize("storage", STORAGES)
def test_a_read_only_opener_of_a_changed_schema_is_told_to_open_a_writer_first(storage, tmp_path):
    path = _filled(storage, tmp_path)
    before = files(tmp_path)
    New = _fields(extra=(int, 3))
    with pytest.raises(hs.ConfigError, match="writer with the new schema first"):
        open_da(storage, path, New, read_only=True)
    assert files(tmp_path) == before
    open_da(storage, path, New).close()
    with open_da(storage, path, New, read_only=True) as da:
        assert len(da) == 40 and da["d3"].extra == 3


# ------------------------------------------------------------------ values carried into a new kind
@pytest.mark.parametrize("storage", STORAGES)
def test_str_becoming_text_or_keyword_indexes_the_stored_values(storage, tmp_path):
    path = _filled(storage, tmp_path)
    with open_da(storage, path, Filled) as da:
        da.update("d1", note="gamma ray")
        da.update("d2", note="x")
    Text = _fields(note=(hs.Text, "plain note"))
    with open_da(storage, path, Text) as da:
        assert set(da.find(text="gamma", text_fields={"note": 1.0}, limit=ALL).ids) == {"d1"}
        assert len(da.find(text="plain", text_fields={"note": 1.0}, limit=ALL).ids) == 38
    Kw = _fields(note=None, title=(hs.Keyword, ...))  # hs.Text -> hs.Keyword: the stored strings filtered on
    with open_da(storage, path, Kw) as da:
        assert set(da.find(filter={"title": "gamma doc"}, limit=None).ids) == {f"d{i}" for i in range(2, 40, 5)}
        assert "note" not in da["d1"].model_dump()


@pytest.mark.parametrize("storage", STORAGES)
def test_values_that_are_not_strings_are_not_carried_into_text(storage, tmp_path):
    Any_ = pydantic.create_model("Loose", __base__=hs.Document, v=(hs.Vector[4], ...), meta=(object, None))
    path = where(storage, tmp_path)
    with open_da(storage, path, Any_) as da:
        da.extend([Any_(id="a", v=np.ones(4, np.float32), meta="words"),
                   Any_(id="b", v=np.ones(4, np.float32), meta={"k": 1})])
    before = files(tmp_path)
    Strict = pydantic.create_model("Changed", __base__=hs.Document, v=(hs.Vector[4], ...),
                                   meta=(Optional[hs.Text], None))
    with pytest.raises(hs.ConfigError, match="meta") as e:
        open_da(storage, path, Strict)
    assert "'b'" in str(e.value)
    assert files(tmp_path) == before


# ------------------------------------------------------------------ history
@pytest.mark.parametrize("storage", STORAGES)
def test_the_history_of_the_schema_is_in_stats(storage, tmp_path):
    path = _filled(storage, tmp_path)
    with open_da(storage, path, Filled) as da:
        h = da.stats()["schema_history"]
        assert [v["version"] for v in h] == [1] and h[0]["added"] == h[0]["removed"] == []
        datetime.datetime.fromisoformat(h[0]["at"])
    Two = _fields(count=None, extra=(int, 3))
    with open_da(storage, path, Two) as da:
        h = da.stats()["schema_history"]
    Three = _fields(count=None, extra=None, body=(hs.Text, ""))
    open_da(storage, path, Three).close()
    with open_da(storage, path, Three) as da:  # kept across a reopen; an unchanged reopen adds nothing
        h = da.stats()["schema_history"]
    assert [v["version"] for v in h] == [1, 2, 3]
    assert (h[1]["added"], h[1]["removed"]) == (["extra"], ["count"])
    assert (h[2]["added"], h[2]["removed"]) == (["body"], ["extra"])
    for v, model in zip(h, (Filled, Two, Three)):
        assert sorted(map(tuple, v["fields"])) == sorted(map(tuple, model.__hs_schema__.fingerprint()))
        datetime.datetime.fromisoformat(v["at"])


# ------------------------------------------------------------------ kill -9 while evolving
CRASH_DOCS = 1000


class AB(hs.Document):
    a: str = ""
    b: str = ""
    n1: int = 0
    n2: int = 0
    note: Optional[str] = None
    emb: hs.Vector[3]


class BA(hs.Document):  # the same fields in another order
    b: str = ""
    a: str = ""
    n2: int = 0
    n1: int = 0
    note: Optional[str] = None
    emb: hs.Vector[3]


class ABRequired(hs.Document):  # the same order; note required now, with a default
    a: str = ""
    b: str = ""
    n1: int = 0
    n2: int = 0
    note: str = "dflt"
    emb: hs.Vector[3]


@pytest.mark.parametrize("snapshot", [False, True])
@pytest.mark.parametrize("change", ["reordered", "required"])
@pytest.mark.parametrize("storage", STORAGES)
def test_fields_declared_in_another_order_keep_their_values(storage, change, snapshot, tmp_path):
    """"reordered": the same fields in another order (the files' fingerprint is sorted by name and
    unindexed values are stored in declaration order: their values swapped); "required": an
    unindexed Optional field made required with a default (its stored None stayed, and every
    read of such a document failed)."""
    path = where(storage, tmp_path)
    docs = [{"id": f"d{i}", "a": f"A{i}", "b": f"B{i}", "n1": i, "n2": 100 + i, "note": None if i % 2 else f"N{i}",
             "emb": [1.0, float(i), 0.0]} for i in range(4)]
    da = open_da(storage, path, AB)
    da.extend(docs[:2])
    if snapshot:
        da.close()  # a snapshot of the first two
        da = open_da(storage, path, AB)
    da.extend(docs[2:])
    with warnings.catch_warnings():  # dropped without close(): the last writes stay in the log
        warnings.simplefilter("ignore", ResourceWarning)
        del da
        gc.collect()
    new = BA if change == "reordered" else ABRequired
    default = None if change == "reordered" else "dflt"
    want = {d["id"]: dict(d, note=d["note"] if d["note"] is not None else default) for d in docs}
    for model in (new, new, AB):  # evolved, reopened as it is, and back
        with open_da(storage, path, model) as da:
            got = {d.id: {k: (list(map(float, v)) if k == "emb" else v) for k, v in d.model_dump().items()}
                   for d in da}
            assert got == want, (model.__name__, got)
            assert da.find(filter={"n1": 2}, limit=None).ids == ["d2"]
            assert da.find(vector=[1.0, 3.0, 0.0], limit=1, exact=True).ids == ["d3"]


class Old(hs.Document):
    title: hs.Text
    note: str = ""
    gone: int = 0
    v: hs.Vector[8]


class New(hs.Document):
    title: hs.Text
    note: hs.Text = ""
    v: hs.Vector[8]
    added: hs.Keyword = "fresh"
    body: hs.Text = "filled body"


def crash_docs() -> list:
    rng = np.random.default_rng(7)
    V = rng.standard_normal((CRASH_DOCS, 8)).astype(np.float32)
    return [dict(id=f"d{i}", title=f"{WORDS[i % 5]} {i}", note=f"note {WORDS[i % 3]}", gone=i, v=V[i])
            for i in range(CRASH_DOCS)]


def run_evolver(storage: str, path: str) -> None:
    print("start", flush=True)
    open_da(storage, Path(path), New).close()
    print("done", flush=True)


_CHILD = "import sys\nfrom tests.contract.test_schema_evolution import run_evolver\nrun_evolver(*sys.argv[1:])\n"


def start_evolver(storage: str, path: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, storage, str(path)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
    assert proc.stdout.readline().strip() == b"start", proc.communicate()[1][-3000:]
    return proc


def old_collection(storage: str, tmp: Path) -> Path:
    tmp.mkdir()
    path = where(storage, tmp)
    with open_da(storage, path, Old) as da:
        da.extend([Old(**d) for d in crash_docs()])
    return path


@pytest.mark.parametrize("storage", STORAGES)
def test_kill_9_while_evolving_leaves_the_old_or_the_new_collection(storage, tmp_path):
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    want = crash_docs()
    # how long the child takes to evolve, so that the kills land before, during and after it
    proc = start_evolver(storage, old_collection(storage, tmp_path / "timed"))
    started = time.perf_counter()
    assert proc.stdout.readline().strip() == b"done", proc.communicate()[1][-3000:]
    took = time.perf_counter() - started
    proc.communicate(timeout=60)
    seen = set()
    for trial in range(2):
        path = old_collection(storage, tmp_path / f"t{trial}")
        proc = start_evolver(storage, path)
        time.sleep(rng.uniform(0.0, 1.2 * took))
        proc.send_signal(signal.SIGKILL)
        out, err = proc.communicate(timeout=60)
        finished = b"done" in out
        try:  # which collection is there, without changing it
            da = open_da(storage, path, New, read_only=True)
            evolved = True
        except hs.ConfigError:
            assert not finished, f"seed {seed}: the evolution was acknowledged, yet the files are the old schema's"
            da = open_da(storage, path, Old, read_only=True)
            evolved = False
        seen.add(evolved)
        with da:
            got = {d.id: d.model_dump() for d in da}
        assert len(got) == len(want)
        for d in want:
            g = got[d["id"]]
            assert g["title"] == d["title"] and g["note"] == d["note"] and g["v"].tolist() == d["v"].tolist()
            if evolved:
                assert (g["added"], g["body"]) == ("fresh", "filled body") and "gone" not in g
            else:
                assert g["gone"] == d["gone"]
        with open_da(storage, path, New) as da:  # a writer then evolves it (again) under the new schema
            assert len(da) == CRASH_DOCS
            assert len(da.find(text="filled", text_fields={"body": 1.0}, limit=ALL)) == CRASH_DOCS
            assert set(da.find(text="note gamma", text_fields={"note": 1.0}, limit=ALL, operator="and").ids) \
                == {d["id"] for d in want if d["note"] == "note gamma"}
    print(f"{storage}: evolution took {took:.3f} s; killed collections found {sorted(seen)} (True: evolved)",
          file=sys.stderr)


@pytest.mark.parametrize("storage", STORAGES)
def test_a_follower_of_the_old_class_is_told_the_writer_changed_the_fields(storage, tmp_path):
    """A follower open with the old class when a writer evolves the collection: its reads raise
    ConfigError saying a writer changed the fields (not that its own class must be applied by a
    writer, which would evolve the collection back); a new reader with the writer's class reads."""
    path = where(storage, tmp_path)
    docs = [{"id": "d1", "a": "x", "emb": [1.0, 0.0, 0.0]}]
    with open_da(storage, path, AB) as w:
        w.extend(docs)
    follower = open_da(storage, path, AB, read_only=True)
    with open_da(storage, path, ABRequired) as w:  # the writer's new class
        w.update("d1", note="set")
    with pytest.raises(hs.ConfigError, match="writer changed the fields"):
        len(follower)
    follower.close()
    with open_da(storage, path, ABRequired, read_only=True) as ro:
        assert ro["d1"].note == "set"


class Plain(hs.Document):
    v: hs.Vector[4]


class PlainTagged(hs.Document):  # an Optional unindexed field added
    v: hs.Vector[4]
    tag: Optional[str] = None


@pytest.mark.parametrize("storage", STORAGES)
def test_writes_that_grow_the_collection_after_an_unindexed_field_was_added(storage, tmp_path):
    """The added field's presence is carried at the collection's capacity: the first growth after
    the evolution keeps every document (it failed with a numpy broadcast error before)."""
    path = tmp_path / ("c.db" if storage == "sqlite" else "c")
    model = {}
    with hs.DocumentArray(Plain, storage=storage, path=path) as da:
        da.extend([{"id": f"d{i}", "v": np.full(4, i, dtype=np.float32)} for i in range(10)])
        model.update({f"d{i}": None for i in range(10)})
    for again in range(2):
        with hs.DocumentArray(PlainTagged, storage=storage, path=path) as da:
            if again == 0:  # far past the carried capacity
                da.extend([{"id": f"n{i}", "v": np.ones(4, dtype=np.float32), "tag": f"t{i}"} for i in range(3000)])
                model.update({f"n{i}": f"t{i}" for i in range(3000)})
            assert {d.id: d.tag for d in da} == model
