"""The harness's plots: every series its own colour AND marker, labels at a readable size.

Reads the matplotlib figures plots() draws (plt.close is held off so they stay open): the
styles are checked on the artists, not on pixels.
"""
import itertools

import pytest

plt = pytest.importorskip("matplotlib.pyplot")
from matplotlib.colors import to_hex  # noqa: E402

from hybridsearch.bench.plots import plots  # noqa: E402

STORAGES = ["memory", "hnsw", "sqlite", "hnswlib", "annlite", "qdrant", "elasticsearch", "opensearch",
            "vespa", "weaviate", "chroma", "milvus", "lancedb"]
KINDS = ("lexical", "vector", "hybrid")


def _results():
    ann = [{"storage": s, "m": m, "ef_construct": 100,
            "points": [{"ef": 10, "recall": 0.9, "qps": 1000.0 + i}, {"ef": 20, "recall": 0.99, "qps": 500.0 + i}]}
           for i, (s, m) in enumerate(itertools.product(STORAGES[:7], (16, 32))) if i < 14]
    runs = [{"qps": q, "p99_ms": 1.0 + q / 1000, "qps_per_core": q} for q in (100.0, 180.0, 300.0)]
    eco = [{"storage": s, "queries": {k: runs for k in KINDS if not (s == "hnswlib" and k != "vector")}}
           for s in STORAGES]
    return {"ann": ann, "ecommerce": eco}


@pytest.fixture
def figures(tmp_path, monkeypatch):
    plt.close("all")
    monkeypatch.setattr(plt, "close", lambda *a, **k: None)
    written = plots(_results(), tmp_path)
    assert written == ["recall_vs_qps.png", "latency_vs_qps.png", "qps_per_core.png"]
    figs = {}
    for n in plt.get_fignums():
        fig = plt.figure(n)
        title = fig._suptitle.get_text() if fig._suptitle else fig.axes[0].get_title()
        figs[title] = fig
    yield figs
    monkeypatch.undo()
    plt.close("all")


def _series(ax):
    """(label, colour, marker) of every labelled line of an axes (an errorbar's data line too)."""
    out = []
    for handle, label in zip(*ax.get_legend_handles_labels()):
        line = handle[0] if isinstance(handle, tuple) else handle
        out.append((label, to_hex(line.get_color()), line.get_marker()))
    return out


def _distinct(series):
    colours = [c for _, c, _ in series]
    markers = [m for _, _, m in series]
    assert len(set(colours)) == len(colours), f"colours repeat: {series}"
    assert len(set(markers)) == len(markers), f"markers repeat: {series}"


def test_recall_vs_qps_gives_every_series_its_colour_and_marker(figures):
    ax = figures["Recall vs QPS"].axes[0]
    series = _series(ax)
    assert len(series) == 14
    _distinct(series)


def test_latency_vs_qps_gives_every_storage_its_colour_and_marker_in_every_panel(figures):
    fig = next(f for t, f in figures.items() if t.startswith("Latency"))
    seen = {}
    for ax in fig.axes:
        series = _series(ax)
        assert series, "a panel without series"
        _distinct(series)
        for label, colour, marker in series:  # one storage, one style, in every panel
            assert seen.setdefault(label, (colour, marker)) == (colour, marker), label
    assert set(seen) == set(STORAGES)
    legend_labels = [t.get_text() for lg in fig.legends for t in lg.get_texts()]
    assert sorted(legend_labels) == sorted(STORAGES)  # each storage once in the figure's legend


def test_labels_are_readable(figures):
    for title, fig in figures.items():
        for ax in fig.axes:
            for text in [ax.xaxis.label, ax.yaxis.label, *ax.get_xticklabels()]:
                if text.get_text():
                    assert text.get_fontsize() >= 8, (title, text.get_text(), text.get_fontsize())
        legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
        assert legends, title
        for lg in legends:
            assert all(t.get_fontsize() >= 8 for t in lg.get_texts()), title
