"""What a type checker says of hs.DocumentArray(...) (issue 31 item 4, API.md section 2): each
storage name has its own overload with its options typed, so an editor completes them and mypy
refuses a wrong type, an option the storage does not take or an unknown mode. Public API only;
mypy is in the test extras."""
import pytest

SNIPPET = '''\
from pathlib import Path
from typing import Any

import hybridsearch as hs


class Product(hs.Document):
    title: str = ""


name: str = "hnsw"
options: dict[str, Any] = {"m": 32}
ok = [
    hs.DocumentArray(Product, storage="hnsw", m=32, ef=40, path=Path("x"), mode="create"),
    hs.DocumentArray(Product),
    hs.DocumentArray(Product, "sqlite", path="x.db", table="t"),
    hs.DocumentArray(Product, storage="qdrant", url="http://127.0.0.1:6333", collection="c", mode="open"),
    hs.DocumentArray(Product, storage="elasticsearch", hosts="http://127.0.0.1:9200", index="p", shards=2),
    hs.DocumentArray(Product, storage="hnsw", config=hs.HnswConfig(m=32)),
    hs.DocumentArray(Product, storage=name, config=hs.HnswConfig(m=32)),
    hs.DocumentArray(Product, storage=name, **options),
]
reveal_type(hs.DocumentArray(Product, storage="hnsw", m=32))
bad_type = hs.DocumentArray(Product, storage="hnsw", m="x")
bad_option = hs.DocumentArray(Product, storage="memory", m=32)
bad_mode = hs.DocumentArray(Product, storage="sqlite", path="x.db", mode="overwrite")
bad_threads = hs.DocumentArray(Product, storage="hnswlib", threads="all")
'''


def test_mypy_checks_each_storages_options(tmp_path):
    api = pytest.importorskip("mypy.api")  # in the test extras
    snippet = tmp_path / "snippet.py"
    snippet.write_text(SNIPPET)
    out, err, _ = api.run([str(snippet), "--no-error-summary", "--cache-dir", str(tmp_path / ".mypy"),
                           "--follow-imports=silent", "--ignore-missing-imports", "--hide-error-context"])
    lines = SNIPPET.splitlines()
    errors = {}
    for line in out.splitlines():
        parts = line.split(":", 3)
        if len(parts) == 4 and parts[0].endswith("snippet.py") and parts[2].strip() == "error":
            errors.setdefault(lines[int(parts[1]) - 1].split(" = ")[0], []).append(parts[3])
    # exactly the four bad calls, nothing among the good ones (a config of another storage passes
    # the overload for a name held in a variable: it is refused when the collection opens)
    assert sorted(errors) == ["bad_mode", "bad_option", "bad_threads", "bad_type"], out + err
    assert any('"DocumentArray"' in e for e in errors["bad_type"]), errors
    revealed = [line for line in out.splitlines() if "Revealed type" in line]
    assert len(revealed) == 1 and "DocumentArray[snippet.Product]" in revealed[0], out
