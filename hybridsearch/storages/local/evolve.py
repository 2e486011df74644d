"""Schema evolution of a journaled collection (memory, hnsw with `path=`) on a writer's open.

The journal found files of an earlier schema that this one may evolve from (engine/persist/
evolve.py decided, before anything was read) and decodes them under their own layout. Here the
collection is loaded as stored into a RAM-only storage of the same kind over that layout, then
carried over to the opening storage without re-inserting anything: the same slots, the kept
columns and vector blocks as they are, the graphs of the kept vector fields (hnsw) as they are,
new columns holding the defaults, text fields new to the index indexed (engine/evolution.py).
Last, one new generation is written as any snapshot is (persist/journal.py _publish): snapshot,
empty log, then MANIFEST naming them with the new schema and its history. The vectors and graphs
are copied byte for byte into the new snapshot file. Until MANIFEST is renamed over the old one
the files are the old collection (a crash leaves it, and it evolves again on the next open);
after it, the new one.
"""
from __future__ import annotations

import dataclasses
import logging
import time

from hybridsearch.engine.evolution import carry_store, carry_text
from hybridsearch.errors import ConfigError

log = logging.getLogger("hybridsearch")


def evolve(storage, snapshot, ops: list, where: str) -> None:
    """Opens `storage` (of the new schema) on the files of the earlier one the journal holds."""
    started = time.perf_counter()
    journal = storage.journal
    plan = journal.evolution
    stored_metrics = _stored_metrics(snapshot)
    if storage.index_metric_bound:
        for name, metric in stored_metrics.items():
            if name in storage.metrics and name in plan.kept and metric != storage.metrics[name]:
                raise ConfigError(f"{plan.schema.name}.{name}: the stored collection's index was built with "
                                  f"metric={metric!r}, not {storage.metrics[name]!r}: open it with "
                                  f"metric={metric!r} (a metric change needs the vectors stored again)")
    old_schema = journal.schema
    metrics = {name: storage.metrics.get(name) if name in plan.kept else stored_metrics.get(name, "cosine")
               for name in [*old_schema.vectors, *old_schema.multi]}
    metrics = {k: v or "cosine" for k, v in metrics.items()}
    # the stored state, read into RAM only (no files, no on-disk vector block) and carried over
    config = dataclasses.replace(storage.config, path=None, read_only=False, metric=metrics,
                                 **({"vectors_on_disk": False} if hasattr(storage.config, "vectors_on_disk") else {}))
    old = type(storage)(old_schema, config)
    old._load_state(snapshot, ops, where)
    storage._mappings.extend(old._mappings)  # the carried arrays are views of the old snapshot
    rows = carry_store(old.store, storage.store, plan)
    carry_text(old.text, storage.text, storage.store, plan, rows)
    storage._adopt_index(old, plan)
    journal.finish_evolution()
    with storage.writer, storage.lock.write():
        storage._snapshot()
    log.info("%s storage evolved the schema of %s to %s (%s): %d documents in %.3f s", storage.name, where,
             plan.schema.name, plan.describe(), storage.store.n_live, time.perf_counter() - started)


def _stored_metrics(snapshot) -> dict:
    """Dense field -> the metric the snapshot recorded (nothing without a snapshot: the index is
    then built from the log's writes, for whatever metric the opener gives)."""
    if snapshot is None:
        return {}
    columns = snapshot.meta.get("columns")
    metrics = columns.get("metrics") if isinstance(columns, dict) else None
    return {k: v for k, v in metrics.items() if isinstance(v, str)} if isinstance(metrics, dict) else {}
