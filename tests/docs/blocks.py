"""The ```python blocks of a Markdown file, and what each one needs to run.

A block's fence info string is `python` followed by optional `key=value` words:

    ```python node=elasticsearch
    ```

`node=elasticsearch|opensearch|vespa|weaviate` marks a block that needs a running search node
(tests/docs/test_docs.py runs it only where one answers). Any other word is an error,
so a typo cannot silently skip a block. Standard library only: the child process that
runs the blocks (run_blocks.py) imports it too.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

NODES = ("elasticsearch", "opensearch", "vespa", "weaviate")
_OPEN = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")


@dataclass(frozen=True)
class Block:
    line: int  # 1-based line of the block's first code line in the file
    code: str
    node: Optional[str] = None


def python_blocks(text: str, where: str = "") -> list:
    """Every ```python block of a Markdown text, in order (other fences are skipped)."""
    blocks = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = _OPEN.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = m["indent"], m["fence"], m["info"].split()
        end = i + 1
        while end < len(lines) and not (lines[end].strip().startswith(fence)
                                        and lines[end].strip().strip(fence[0]) == ""):
            end += 1
        if info and info[0] == "python":
            node = None
            for word in info[1:]:
                key, _, value = word.partition("=")
                if key != "node" or value not in NODES:
                    raise ValueError(f"{where}:{i + 1}: unknown fence word {word!r}; "
                                     f"the only one is node=({'|'.join(NODES)})")
                node = value
            body = [ln[len(indent):] if ln.startswith(indent) else ln.lstrip() for ln in lines[i + 1:end]]
            blocks.append(Block(i + 2, "\n".join(body) + "\n", node))
        i = end + 1
    return blocks
