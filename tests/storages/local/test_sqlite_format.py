"""storage="sqlite" refuses a table of another layout instead of converting it: a table of ours
(named in hs_meta with this schema's fingerprint) without the per-row checksum column `_crc`
raises hs.BackendError saying so, for a writer and a read-only opener alike, and the file is
left exactly as it was. Public API only; the table is changed from outside with sqlite3, as
another program would.
"""
import sqlite3
from typing import Optional

import pytest

import hybridsearch as hs


class Item(hs.Document):
    title: hs.Text = ""
    price: int = 0
    embedding: Optional[hs.Vector[4]] = None


@pytest.mark.parametrize("read_only", [False, True])
def test_a_table_without_row_checksums_is_refused(tmp_path, read_only):
    path = tmp_path / "c.db"
    with hs.DocumentArray(Item, storage="sqlite", path=path) as da:
        da.extend([Item(id=f"d{i}", title=f"title {i}", price=i, embedding=[i, 1, 0, 0]) for i in range(10)])
    with sqlite3.connect(path) as conn:
        conn.execute("ALTER TABLE documents DROP COLUMN _crc")
    conn.close()
    before = path.read_bytes()
    with pytest.raises(hs.BackendError, match=r"c\.db.*'documents'.*unsupported format.*_crc"):
        hs.DocumentArray(Item, storage="sqlite", path=path, read_only=read_only)
    assert path.read_bytes() == before  # no column added, no row certified
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0] == 10
    conn.close()
