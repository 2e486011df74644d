"""Putting figures on a page: number formats, ratios, Markdown and aligned text tables, and the
output of a benchmark script (printed as it runs, written to the folder the user names)."""
from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from pathlib import Path


def fmt(v, digits: int = 0) -> str:
    """A number with thousands separators and `digits` decimals; "–" for None / nan / inf;
    text as it is."""
    if isinstance(v, str):
        return v
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "–"
    return f"{v:,.{digits}f}"


def quotient(a, b):
    """a / b, or None when either is missing or not finite, or b is 0."""
    if a is None or b is None or not b or any(isinstance(x, float) and not math.isfinite(x) for x in (a, b)):
        return None
    return a / b


def ratio(a, b, digits: int = 2) -> str:
    """a / b as "1.23x", or "n/a" (see quotient)."""
    q = quotient(a, b)
    return "n/a" if q is None else f"{q:.{digits}f}x"


def verdict(value, ok) -> str:
    """PASS / MISS of ok(value), or n/a when there is no value."""
    return "n/a" if value is None else ("PASS" if ok(value) else "MISS")


def markdown_table(header: Sequence[str], rows: Sequence[Sequence]) -> list:
    """Lines of a Markdown table (cells already formatted as text)."""
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    return lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]


_NUMBER = re.compile(r"^([-+]?[\d.,]+|n/a|–|error)")


def text_table(header: Sequence[str], rows: Sequence[Sequence], indent: str = "  ") -> list:
    """Lines of a table for a terminal: columns of figures right-aligned, the first column and
    columns of words left-aligned."""
    cells = [list(map(str, header))] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells if i < len(r)) for i in range(len(header))]
    left = [i == 0 or not all(_NUMBER.match(r[i]) for r in cells[1:] if i < len(r) and r[i]) for i in range(len(header))]
    return [indent + "  ".join(c.ljust(w) if left[i] else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
            for r in cells]


class Output:
    """What a benchmark script shows: say() prints a line and keeps it; save() writes the lines
    to DIR/NAME.txt and the figures to DIR/NAME.json when the user named a folder (--out DIR).
    Nothing is written anywhere else."""

    def __init__(self, folder: str | None, name: str) -> None:
        self.folder, self.name, self.lines = (Path(folder) if folder else None), name, []

    def say(self, line: str = "") -> None:
        """Prints a line (flushed at once) and keeps it for the text file."""
        print(line, flush=True)
        self.lines.append(line)

    def table(self, header: Sequence[str], rows: Sequence[Sequence]) -> None:
        """say() every line of a text_table."""
        for line in text_table(header, rows):
            self.say(line)

    def save(self, figures: dict) -> None:
        """Writes NAME.txt and NAME.json into the folder (created if needed); nothing without one."""
        if self.folder is None:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / f"{self.name}.txt").write_text("\n".join(self.lines) + "\n")
        (self.folder / f"{self.name}.json").write_text(json.dumps(figures, indent=1, default=_plain))
        print(f"wrote {self.folder / (self.name + '.txt')} and {self.folder / (self.name + '.json')}")


def _plain(v):
    """JSON for numpy scalars and arrays and anything else (its text)."""
    if hasattr(v, "tolist"):
        return v.tolist()
    return str(v)
