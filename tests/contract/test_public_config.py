"""Public config dataclasses (issue 31 item 4): hs.HnswConfig(...) and friends, accepted as
DocumentArray(P, storage=..., config=...) and equal in effect to the same keyword options
(the model: a collection opened with the keywords). Public API only."""
import dataclasses
import subprocess
import sys

import pytest

import hybridsearch as hs

NAMES = {"memory": "MemoryConfig", "hnsw": "HnswConfig", "sqlite": "SqliteConfig", "hnswlib": "HnswlibConfig",
         "qdrant": "QdrantConfig", "elasticsearch": "ElasticsearchConfig", "opensearch": "OpenSearchConfig",
         "vespa": "VespaConfig", "weaviate": "WeaviateConfig"}  # annlite: its own process (test below)


class P(hs.Document):
    title: hs.Text = ""
    emb: hs.Vector[4]


def _options(storage, tmp_path) -> dict:
    return {"memory": {"metric": "ip"}, "hnsw": {"m": 32, "ef": 40, "metric": "l2"},
            "sqlite": {"path": str(tmp_path / "a.db"), "metric": "ip"},
            "hnswlib": {"m": 8, "ef_construct": 50}, "qdrant": {"m": 8}}[storage]


@pytest.mark.parametrize("storage", sorted(NAMES))
def test_every_storage_has_a_public_config_dataclass(storage):
    cls = getattr(hs, NAMES[storage])
    assert dataclasses.is_dataclass(cls)
    assert {"metric"} <= {f.name for f in dataclasses.fields(cls)}


@pytest.mark.parametrize("storage", ["memory", "hnsw", "sqlite", "hnswlib", "qdrant"])
def test_config_equals_the_same_keywords(storage, tmp_path):
    options = _options(storage, tmp_path)
    with hs.DocumentArray(P, storage=storage, **options) as by_keywords:
        want = by_keywords.stats()
    config = getattr(hs, NAMES[storage])(**options)
    with hs.DocumentArray(P, storage=storage, config=config) as by_config:
        by_config.extend([{"id": "a", "emb": [1, 0, 0, 0]}])
        got = by_config.stats()
    assert {k: got[k] for k in options} == {k: want[k] for k in options}


def test_a_keyword_may_set_what_the_config_leaves_at_its_default():
    with hs.DocumentArray(P, storage="hnsw", config=hs.HnswConfig(m=32), ef=10) as da:
        assert (da.stats()["m"], da.stats()["ef"]) == (32, 10)
    with hs.DocumentArray(P, storage="hnsw", config=hs.HnswConfig(m=32), m=32) as da:  # the same twice
        assert da.stats()["m"] == 32


def test_config_and_keywords_that_disagree_are_a_config_error():
    with pytest.raises(hs.ConfigError, match="disagree on m"):
        hs.DocumentArray(P, storage="hnsw", config=hs.HnswConfig(m=32), m=16)


@pytest.mark.parametrize("storage, config", [("hnsw", "MemoryConfig"), ("memory", "HnswConfig"),
                                             ("sqlite", "HnswConfig"), ("hnsw", "HnswlibConfig")])
def test_a_config_of_another_storage_is_a_config_error(storage, config):
    with pytest.raises(hs.ConfigError, match=f"takes a hs.{NAMES[storage]}"):
        hs.DocumentArray(P, storage=storage, config=getattr(hs, config)())


@pytest.mark.parametrize("bad", [{"m": 1}, {"ef": 0}, {"metric": "hamming"}])
def test_a_config_value_is_checked_as_a_keyword_is(bad):
    with pytest.raises(hs.ConfigError, match=f"option {next(iter(bad))} must be"):
        hs.DocumentArray(P, storage="hnsw", config=hs.HnswConfig(**bad))


def test_not_a_config_is_a_config_error():
    with pytest.raises(hs.ConfigError, match="takes a hs.HnswConfig, got dict"):
        hs.DocumentArray(P, storage="hnsw", config={"m": 32})


def test_configs_load_their_library_only_when_named():
    code = ("import sys, hybridsearch as hs\n"
            "hs.HnswConfig(m=8); hs.SqliteConfig(path='x.db'); hs.MemoryConfig()\n"
            "assert 'hnswlib' not in sys.modules and 'annlite' not in sys.modules\n"
            "a = hs.AnnliteConfig(m=8)\n"
            "assert 'annlite' in sys.modules and 'hnswlib' not in sys.modules\n"
            "try:\n    hs.NoSuchConfig\nexcept AttributeError:\n    print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_type_checkers_see_the_config_classes(tmp_path):
    """What an editor completes: hs.HnswConfig(...) is its class for mypy, not Any."""
    api = pytest.importorskip("mypy.api")  # in the test extras
    snippet = tmp_path / "snippet.py"
    snippet.write_text("import hybridsearch as hs\n"
                       "reveal_type(hs.HnswConfig(m=32))\n"
                       "reveal_type(hs.SqliteConfig(path='x.db'))\n"
                       "reveal_type(hs.QdrantConfig())\n")
    out, err, _ = api.run([str(snippet), "--no-error-summary", "--cache-dir", str(tmp_path / ".mypy"),
                           "--follow-imports=silent", "--ignore-missing-imports"])
    revealed = [line for line in out.splitlines() if "Revealed type" in line]
    assert len(revealed) == 3, out + err
    for line, name in zip(revealed, ("HnswConfig", "SqliteConfig", "QdrantConfig")):
        assert line.endswith(f'.{name}"'), line
