"""Results.to_list() / to_pandas() / to_arrow() (issue 31 item 4) against a model built from the
results' own ids, scores, part_scores and documents. Public API only."""
import math

import numpy as np
import pytest

import hybridsearch as hs
from tests.conftest import EMBEDDED, storage_fixture
from tests.hidden_modules import run_without

storage = storage_fixture(EMBEDDED)


class Row(hs.Document):
    title: hs.Text = ""
    tag: hs.Keyword = "a"
    n: int = 0
    extra: dict = {}
    emb: hs.Vector[3]


def _docs(rng):
    return [{"id": f"r{i}", "title": " ".join(["blue", "sky", "sea"][: 1 + i % 3]), "tag": "abc"[i % 3], "n": i,
             "extra": {"k": i}, "emb": rng.normal(size=3)} for i in range(30)]


def _model(res) -> list:
    """What to_list must give: one dict per hit from the public fields of Results."""
    rows = []
    parts = res.part_scores
    for i, (hit_id, doc) in enumerate(zip(res.ids, res.docs)):
        row = {"id": hit_id}
        for name in Row.model_fields:
            if name != "id":
                row[name] = getattr(doc, name)
        row["_score"] = float(res.scores[i])
        for name, part in parts.items():
            row[f"_score_{name}"] = float(part[i])
        rows.append(row)
    return rows


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.float32))
    return a == b


def _assert_rows(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert list(g) == list(w), (list(g), list(w))
        for k in w:
            assert _same(g[k], w[k]), (k, g[k], w[k])


def _finds(da, rng):
    q = rng.normal(size=3)
    out = [da.find(vector=q, limit=5), da.find(filter={"tag": "b"}, limit=4)]
    if da.storage not in ("hnswlib", "annlite"):  # these two have no text search
        out += [da.find(text="blue sky", limit=5), da.find(text="sea", vector=q, fusion="rrf", limit=6)]
    return out


def test_to_list_holds_each_hit_with_its_fields_and_scores(make_da, rng):
    da = make_da(Row)
    da.extend(_docs(rng))
    for res in _finds(da, rng):
        _assert_rows(res.to_list(), _model(res))


def test_to_pandas_and_to_arrow_hold_the_rows_of_to_list(make_da, rng):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    da = make_da(Row)
    da.extend(_docs(rng))
    for res in _finds(da, rng):
        want = res.to_list()
        frame = res.to_pandas()
        assert isinstance(frame, pd.DataFrame)
        _assert_rows(frame.to_dict("records"), want)
        table = res.to_arrow()
        assert table.schema.field("_score").type == "double" and table.schema.field("n").type == "int64"
        assert str(table.schema.field("emb").type) == "fixed_size_list<item: float>[3]"
        _assert_rows(table.to_pylist(), want)


def test_a_page_and_a_deleted_hit():
    da = hs.DocumentArray(Row)
    da.extend(_docs(np.random.default_rng(3)))
    res = da.find(text="blue", limit=6, offset=2)
    gone = res.ids[0]
    del da[gone]
    rows = res.to_list()
    assert [r["id"] for r in rows] == res.ids and rows[0]["title"] is None and rows[0]["_score"] == float(res.scores[0])
    assert res.to_pandas()["id"].tolist() == res.ids


def test_no_hits_gives_the_id_and_score_columns():
    da = hs.DocumentArray(Row)
    res = da.find(text="nothing")
    assert res.to_list() == []
    assert list(res.to_pandas().columns) == ["id", "_score", "_score_text"]
    assert res.to_arrow().num_rows == 0


@pytest.mark.parametrize("method, module, extra", [("to_pandas", "pandas", "pandas"), ("to_arrow", "pyarrow", "arrow")])
def test_without_the_library_the_error_names_the_extra(tmp_path, method, module, extra):
    code = (f"import hybridsearch as hs\nclass R(hs.Document):\n    t: hs.Text = ''\n"
            f"da = hs.DocumentArray(R)\nda.extend([{{'id': 'a', 't': 'x'}}])\n"
            f"res = da.find(text='x')\nassert res.to_list()[0]['id'] == 'a'\n"
            f"try:\n    res.{method}()\nexcept hs.UnsupportedError as e:\n    print(e)\n")
    out = run_without(tmp_path, (module,), code)
    assert out.returncode == 0, out.stderr
    assert f'hybridsearch[{extra}]' in out.stdout and module in out.stdout, out.stdout
