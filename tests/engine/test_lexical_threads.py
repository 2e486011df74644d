"""A large batch indexes its text fields on threads (TextIndex(threads=...)): the result must be
the very index one thread builds - the same term ids, postings and statistics in every field -
because each field owns its dictionaries and index and shares only the thread-safe stem memo.
Internals: the exported arrays are compared, which the public API does not show."""
import numpy as np

import hybridsearch as hs
from hybridsearch.document import schema_of
from hybridsearch.engine.lexical import PARALLEL_MIN_ROWS, TextIndex


class Page(hs.Document):
    title: hs.Text
    body: hs.Text = ""
    notes: hs.Text = ""


def columns(n: int, seed: int) -> dict:
    """Three text fields of words drawn from one small vocabulary (with inflections, so the
    fields stem the same words at the same time), some None and some non-ASCII."""
    rng = np.random.default_rng(seed)
    words = np.array([f"w{i}" for i in range(900)] + [f"run{s}" for s in ("", "s", "ning", "ner")]
                     + ["café", "naïve", "Straße"])

    def texts(length: int) -> list:
        out = [" ".join(rng.choice(words, size=rng.integers(0, length))) for _ in range(n)]
        for i in rng.choice(n, size=n // 50, replace=False):
            out[i] = None
        return out
    return {"title": texts(6), "body": texts(30), "notes": texts(3)}


def test_parallel_fields_build_the_serial_index():
    n = PARALLEL_MIN_ROWS + 1000  # above the threshold: the threaded path runs
    slots = np.arange(n, dtype=np.int64)
    cols = columns(n, 7)
    serial, parallel = TextIndex(schema_of(Page), threads=1), TextIndex(schema_of(Page), threads=3)
    for ti in (serial, parallel):
        ti.add(slots, cols)
        ti.add(slots[::3], {k: v[::-3][:len(slots[::3])] for k, v in cols.items()})  # overwrite some rows
    (m1, a1), (m2, a2) = serial.export(), parallel.export()
    assert m1 == m2
    assert a1.keys() == a2.keys()
    for k in a1:
        np.testing.assert_array_equal(a1[k], a2[k], err_msg=k)
    for q in ("w1 w2 running", "café", "w899 runs w3"):
        ids1, s1 = serial.search(q, 20, None)
        ids2, s2 = parallel.search(q, 20, None)
        np.testing.assert_array_equal(ids1, ids2)
        np.testing.assert_array_equal(s1, s2)


def test_parallel_build_matches_a_collection_built_one_row_at_a_time():
    """Through the public API: memory with every core vs one small batch at a time (serial)."""
    n = PARALLEL_MIN_ROWS + 500
    cols = columns(n, 11)
    docs = [Page(id=str(i), title=cols["title"][i] or "", body=cols["body"][i] or "", notes=cols["notes"][i] or "")
            for i in range(n)]
    big = hs.DocumentArray(Page, threads=2)
    big.extend(docs)
    small = hs.DocumentArray(Page, threads=1)
    for i in range(0, n, 1000):
        small.extend(docs[i:i + 1000])
    for q in ("w10 w20 w30", "runner", "naïve w5"):
        a, b = big.find(text=q, limit=25), small.find(text=q, limit=25)
        assert a.ids == b.ids
        np.testing.assert_allclose(a.scores, b.scores, rtol=1e-6)
