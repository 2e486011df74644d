"""Schema evolution of a sqlite table on a writer's open (the rules: engine/persist/evolve.py).

One transaction: the columns of removed fields are dropped (their indexes first), columns of
added fields added (indexed as a new table's would be), every row rewritten in the columns that
change (the added and changed fields, the JSON of the unindexed fields) and in its `_crc`, which
covers the list of columns and so changes for every row; the vector blobs stay as they are. Each
row's old checksum is verified first, so a damaged row is refused rather than given a new
checksum. hs_meta then records the new fingerprint and the history. SQLite's journal makes the
transaction all or nothing: a crash leaves the old table, which evolves again on the next open.
"""
from __future__ import annotations

import json

from hybridsearch.document import Kind
from hybridsearch.engine.persist import evolve as E
from hybridsearch.errors import BackendError, ConfigError, SchemaError
from hybridsearch.storages.local.sqlite import checks
from hybridsearch.storages.local.sqlite.backup import META


def history(conn, table: str, fp: list) -> list:
    """The schema history hs_meta records for `table` (a table from before it was kept: its
    first version, time unknown)."""
    cols = [r[1] for r in conn.execute(f'PRAGMA table_info("{META}")')]
    if "history" in cols:
        row = conn.execute(f'SELECT history FROM "{META}" WHERE name = ?', [table]).fetchone()
        if row and row[0]:
            try:
                stored = E.valid_history(json.loads(row[0]))
            except ValueError:
                stored = None
            if stored:
                return stored
    return [E.first_version(fp, None)]


def save_history(conn, table: str, hist: list) -> None:
    """Records the history in hs_meta (the column is added to an older hs_meta)."""
    cols = [r[1] for r in conn.execute(f'PRAGMA table_info("{META}")')]
    if "history" not in cols:
        conn.execute(f'ALTER TABLE "{META}" ADD COLUMN history TEXT')
    conn.execute(f'UPDATE "{META}" SET history = ? WHERE name = ?', [json.dumps(hist), table])


def evolve_table(storage, stored_fp: list, sql_types: dict) -> None:
    """Carries table `storage.table_name` from the fields `stored_fp` to storage.schema, or raises
    ConfigError (nothing changed) naming the field that cannot change so."""
    schema, conn, t = storage.schema, storage.conn, storage.table_name
    plan = E.plan(stored_fp, schema)
    if storage.read_only:
        raise ConfigError(f"{storage.path}: table {t!r} holds {schema.name} as it was before a change of its "
                          f"fields ({plan.describe()}); a read-only opener cannot apply it: open it once as a "
                          "writer with the new schema first")
    old = {f[0]: f for f in plan.stored}
    old_cols = [f for f in plan.stored if f[1] != Kind.OTHER.value and f[1] != Kind.ID.value]
    old_other = [f[0] for f in plan.stored if f[1] == Kind.OTHER.value]
    old_crc = checks.row_checksum([Kind.ID] + [Kind(f[1]) for f in old_cols] + ([Kind.OTHER] if old_other else []))
    old_crc_names = ["id"] + [f[0] for f in old_cols] + (["_extra"] if old_other else [])
    new_cols = {s.name: s for s in storage.columns}
    added_cols = [n for n in new_cols if n not in old or old[n][1] == Kind.OTHER.value]
    rewritten = [n for n in new_cols if n in added_cols or n in plan.changed]
    dropped = [f[0] for f in old_cols if f[0] not in new_cols]
    if old_other and not storage.extra:
        dropped.append("_extra")
    with conn:
        conn.execute("BEGIN IMMEDIATE")
        rows = []
        for row in storage.db[t].rows_where(order_by="_seq"):
            want = row.get(checks.CRC_COLUMN)
            if want is not None and want != old_crc(*(row[n] for n in old_crc_names)):
                raise BackendError(f"{storage.path}: row {row['id']!r} of table {t!r} fails its checksum; "
                                   "its schema is not changed over a damaged row")
            try:
                rows.append(_carried(storage, plan, row, old))
            except SchemaError as e:
                raise ConfigError(f"{storage.path}: document {row['id']!r} of table {t!r} cannot be carried "
                                  f"over to {schema.name}: {e}") from None
        for name in dropped:
            for index in _indexes_on(conn, t, name):
                conn.execute(f'DROP INDEX "{index}"')
            conn.execute(f'ALTER TABLE "{t}" DROP COLUMN "{name}"')
        for name in added_cols:
            conn.execute(f'ALTER TABLE "{t}" ADD COLUMN "{name}" {_SQL[sql_types[new_cols[name].kind]]}')
        if storage.extra and not old_other:
            conn.execute(f'ALTER TABLE "{t}" ADD COLUMN "_extra" TEXT')
        for name in rewritten:
            if new_cols[name].kind in (Kind.KEYWORD, Kind.INT, Kind.FLOAT, Kind.BOOL):
                conn.execute(f'CREATE INDEX IF NOT EXISTS "idx_{t}_{name}" ON "{t}" ("{name}")')
        names = rewritten + (["_extra"] if storage.extra else []) + [checks.CRC_COLUMN]
        sets = ", ".join(f'"{n}" = ?' for n in names)
        conn.executemany(f'UPDATE "{t}" SET {sets} WHERE id = ?', [[r[n] for n in names] + [r["id"]] for r in rows])
        fp = schema.fingerprint()
        conn.execute(f'UPDATE "{META}" SET fingerprint = ? WHERE name = ?', [json.dumps(fp), t])
        save_history(conn, t, E.next_version(history(conn, t, plan.stored), plan, fp))


def _indexes_on(conn, table: str, column: str) -> list:
    """Names of the indexes of `table` that cover `column` (SQLite refuses to drop it before them)."""
    out = []
    for _, index, *_ in conn.execute(f'PRAGMA index_list("{table}")').fetchall():
        if any(r[2] == column for r in conn.execute(f'PRAGMA index_info("{index}")')):
            out.append(index)
    return out


_SQL = {str: "TEXT", int: "INTEGER", float: "FLOAT", bytes: "BLOB"}


def _carried(storage, plan, row: dict, old: dict) -> dict:
    """The new schema's row (storage._row) of an old row: removed fields gone, added ones at their
    defaults, a changed field's value moved where the new kind keeps it."""
    extra = json.loads(row["_extra"]) if row.get("_extra") else {}
    r = {"id": row["id"]}
    for s in storage.columns:
        if s.name in old:
            v = extra.get(s.name) if old[s.name][1] == Kind.OTHER.value else row[s.name]
            if v is not None or s.optional or s.name not in plan.changed:
                r[s.name] = v  # a None of a field now required is left out: its default fills it
    if storage.extra:
        kept = {k: v for k, v in extra.items() if k in storage.extra
                and not (v is None and k in plan.changed and not storage.schema.fields[k].optional)}
        r["_extra"] = json.dumps(kept)
    doc = storage._doc(r)
    return storage._row(doc, None)
