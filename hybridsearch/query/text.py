"""A text query with options beyond its words, as the lexical index takes it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class TextQuery:
    """The words of a text find and `fields`: ((hs.Text field, weight), ...) to score only those
    fields, each field's BM25 multiplied by its weight before the best field wins (None: every
    text field, weight 1)."""

    text: str
    fields: Optional[tuple] = None
