"""The annlite storage called directly, below DocumentArray. Runs only in the annlite child
process (tests/storages/wrapped/test_annlite.py starts it); not collected by default.

Why below the public API: DocumentArray refuses these values before any storage sees them
(tests/storages/wrapped/annlite_cases.py checks that through the API); this checks that the
storage, which writes an intent file before it calls AnnLite, refuses them on its own too,
before anything changes."""
import numpy as np

from hybridsearch.batch import build_batch
from hybridsearch.document import schema_of
from tests.storages.wrapped.annlite_cases import Tagged, refused_and_nothing_changed, tagged_abc


def test_the_storage_itself_refuses_unserialisable_values(tmp_path):
    path = tmp_path / "c"
    da = tagged_abc(path)
    storage = da._storage  # internal: the storage below DocumentArray's validation is the unit here
    schema, good, a = schema_of(Tagged), Tagged(id="new", v=np.ones(4)), da["a"]
    refused_and_nothing_changed(da, path, [
        lambda: storage.update_fields("a", {"tags": [object()]}),
        lambda: storage.update_fields("a", {"tags": [b"\xff"]}),
        lambda: storage.update_fields("a", {"k": "\ud800"}),
        lambda: storage.upsert(build_batch(schema, [good, a.model_copy(update={"tags": [object()]})])),
        lambda: storage.upsert(build_batch(schema, [a.model_copy(update={"k": "x\udcff"}), good])),
        lambda: storage.upsert(build_batch(schema, [a.model_copy(update={"id": "b\ud800"})])),
    ])
