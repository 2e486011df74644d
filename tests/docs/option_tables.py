"""The Options table of each docs/storages/<name>.md page, generated from the storage's config
dataclass (storages/config.py `option(default, check, doc)`), so the page cannot drift from the
code.

    python tests/docs/option_tables.py hnsw      # prints the table of storage="hnsw"
    python tests/docs/option_tables.py --write   # rewrites the tables in docs/storages/*.md

In a page the table sits between two markers:

    <!-- options: generated from the config dataclass by tests/docs/option_tables.py -->
    | option | default | meaning |
    ...
    <!-- /options -->

Each storage is imported in a process of its own: annlite and hnswlib cannot share one.
"""
from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = ("memory", "hnsw", "sqlite", "hnswlib", "annlite", "elasticsearch", "vespa", "weaviate")
BEGIN = "<!-- options: generated from the config dataclass by tests/docs/option_tables.py -->"
END = "<!-- /options -->"


def _default(value) -> str:
    return f'`"{value}"`' if isinstance(value, str) else f"`{value!r}`"


def table(storage: str) -> str:
    """The Markdown table of a storage's options: name, default, meaning (imports the storage)."""
    from hybridsearch.storages.registry import storage_class

    config = storage_class(storage).Config
    rows = ["| option | default | meaning |", "| --- | --- | --- |"]
    for f in dataclasses.fields(config):
        meaning = f.metadata.get("doc", "").replace("|", "\\|")
        rows.append(f"| `{f.name}` | {_default(f.default)} | {meaning} |")
    return "\n".join(rows)


def generated(storage: str) -> str:
    """`table(storage)` computed in a child process."""
    out = subprocess.run([sys.executable, __file__, storage], capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise RuntimeError(f"cannot generate the options of {storage!r}: {out.stderr.strip()}")
    return out.stdout.strip()


def page(storage: str) -> Path:
    return ROOT / "docs" / "storages" / f"{storage}.md"


def in_page(text: str) -> str:
    """The table between the markers of a page ('' when the page has none)."""
    if BEGIN not in text or END not in text:
        return ""
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip()


def write() -> None:
    for storage in PAGES:
        path = page(storage)
        text = path.read_text(encoding="utf-8")
        if BEGIN not in text:
            raise SystemExit(f"{path}: no {BEGIN} marker")
        head, rest = text.split(BEGIN, 1)
        tail = rest.split(END, 1)[1]
        path.write_text(f"{head}{BEGIN}\n{generated(storage)}\n{END}{tail}", encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write()
    elif len(sys.argv) == 2:
        print(table(sys.argv[1]))
    else:
        raise SystemExit(__doc__)
