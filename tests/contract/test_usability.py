"""Usability through the public API: typed collections, errors that name the
document, one-id deletes, progress bars and the `hybridsearch` logger."""
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import hybridsearch as hs

ROOT = Path(__file__).resolve().parents[2]


class Item(hs.Document):
    title: hs.Text = ""
    n: int = 0
    v: hs.Vector[3]


def _docs(n):
    return [{"id": f"i{k}", "title": "red", "n": k, "v": [1.0, k % 7, 2.0]} for k in range(n)]


def test_a_bad_document_in_a_large_batch_is_named_by_position_and_id():
    da = hs.DocumentArray(Item)
    docs = _docs(50_000)
    docs[31_337]["n"] = "many"
    with pytest.raises(hs.SchemaError, match=r"document 31337 \(id 'i31337'\).*n") as e:
        da.extend(docs)
    assert "nothing was written" in str(e.value) and len(da) == 0


def test_delete_of_one_string_id_and_repr_of_a_closed_array():
    da = hs.DocumentArray(Item)
    da.extend(_docs(3) + [{"id": "x", "v": [1, 1, 1]}, {"id": "1", "v": [1, 2, 1]}])
    assert da.delete("i1") == 1 and "i1" not in da and "x" in da and "1" in da  # not its characters
    da.close()
    assert repr(da) == "DocumentArray(Item, storage='memory', n=closed)"


def test_progress_bar_on_long_ingests_writes_everything(capsys):
    pytest.importorskip("rich")  # in the test extras; the error without it is tested below
    da = hs.DocumentArray(Item)
    da.extend(_docs(25_000), progress=True)
    assert len(da) == 25_000 and da["i24999"].n == 24999
    da.extend(_docs(10), progress=True)  # short: no bar, same result
    assert len(da) == 25_000


def test_progress_without_rich_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "rich.progress", None)  # an import of it fails
    with pytest.raises(hs.UnsupportedError, match=r'pip install "hybridsearch\[progress\]"'):
        hs.DocumentArray(Item).extend(_docs(2), progress=True)


def test_a_missing_client_says_what_to_install(monkeypatch):
    for storage, module in (("elasticsearch", "elasticsearch"), ("opensearch", "opensearchpy"),
                            ("weaviate", "weaviate")):
        code = textwrap.dedent(f"""
            import sys
            sys.modules[{module!r}] = None
            import hybridsearch as hs
            class D(hs.Document):
                n: int = 0
            try:
                hs.DocumentArray(D, storage={storage!r}, hosts="http://127.0.0.1:9")
            except hs.UnsupportedError as e:
                print(e)
            """)
        out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert f'pip install "hybridsearch[{storage}]"' in out.stdout, out.stdout + out.stderr


def test_logging_of_open_snapshot_close_and_recovery(tmp_path, caplog):
    path = tmp_path / "col"
    with caplog.at_level(logging.INFO, logger="hybridsearch"):
        da = hs.DocumentArray(Item, storage="memory", path=path)
        da.extend(_docs(5))
        da.close()
        again = hs.DocumentArray(Item, storage="memory", path=path)
        again.close()
    text = caplog.text
    assert "opened" in text and "snapshot" in text and "closed" in text and str(path) in text
    # a torn last record is dropped with a warning
    da = hs.DocumentArray(Item, storage="memory", path=path)
    da.extend(_docs(7))
    log = next(p for p in path.iterdir() if p.name.startswith("log-"))
    del da
    with open(log, "ab") as f:
        f.write(b"\x93hsR\x01\x00")
    caplog.clear()
    # a reader leaves it (it may be a write in progress, which a follower reads on a later look)
    with caplog.at_level(logging.DEBUG, logger="hybridsearch"):
        hs.DocumentArray(Item, storage="memory", path=path, read_only=True).close()
    assert "not read yet" in caplog.text and not [r for r in caplog.records if r.levelno >= logging.WARNING]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="hybridsearch"):  # the writer drops it, saying so
        hs.DocumentArray(Item, storage="memory", path=path).close()
    assert "torn" in caplog.text


MYPY_SNIPPET = """
import hybridsearch as hs

class Product(hs.Document):
    title: hs.Text = ""
    price: int = 0

da = hs.DocumentArray(Product)
reveal_type(da)
reveal_type(da["p1"])
reveal_type(da.find(text="x").docs)
for d in da:
    reveal_type(d)
typed: hs.DocumentArray[Product] = da
"""


def test_document_array_is_generic_in_its_schema_for_type_checkers(tmp_path):
    api = pytest.importorskip("mypy.api")  # in the test extras
    snippet = tmp_path / "snippet.py"
    snippet.write_text(MYPY_SNIPPET)
    out, err, status = api.run([str(snippet), "--no-error-summary", "--cache-dir", str(tmp_path / ".mypy"),
                                "--follow-imports=silent", "--ignore-missing-imports"])
    revealed = [line for line in out.splitlines() if "Revealed type" in line]
    assert len(revealed) == 4, out + err
    assert "DocumentArray[snippet.Product]" in revealed[0]
    assert revealed[1].endswith('"snippet.Product"')
    assert "snippet.Product | None" in revealed[2] or "Union[snippet.Product, None]" in revealed[2]
    assert revealed[3].endswith('"snippet.Product"')
    assert os.path.exists(Path(hs.__file__).parent / "py.typed")
