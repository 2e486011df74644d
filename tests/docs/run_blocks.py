"""Child process of the docs test: runs the ```python blocks of one Markdown file, in order,
in one namespace, in the current (temporary) directory.

    python tests/docs/run_blocks.py FILE DISPLAY_NAME RESULT_JSON [NODE=REASON ...]

The blocks run as a script made of them would: in a fresh module registered as
`__main__` (so code that names its own module, such as a storage registered as
f"{__name__}:MyStorage", works), with the temporary directory first on sys.path.
Tracebacks name FILE and its own line numbers. A block marked node=X for a node given
as NODE=REASON stops the run: that block and the rest of the file are skipped, and
RESULT_JSON says why. So does a block that fails because an optional library is not
installed (extras.py: only where it really is missing), naming the extra that installs it. Exit status 0: every block ran (or the rest was skipped).
"""
import json
import os
import sys
import traceback
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from blocks import python_blocks  # noqa: E402
from extras import skip_reason  # noqa: E402


def main() -> int:
    path, shown, result_path = sys.argv[1:4]
    unavailable = dict(arg.split("=", 1) for arg in sys.argv[4:])
    with open(path, encoding="utf-8") as f:
        blocks = python_blocks(f.read(), shown)
    sys.path[0] = os.getcwd()  # as for a script in this directory
    module = types.ModuleType("__main__")
    module.__file__ = os.path.join(os.getcwd(), "docs_blocks.py")
    sys.modules["__main__"] = module
    result = {"status": "passed", "blocks": len(blocks), "ran": 0}
    for block in blocks:
        if block.node in unavailable:
            result.update(status="skipped", line=block.line,
                          reason=f"{shown}:{block.line} and after: {unavailable[block.node]}")
            break
        code = compile("\n" * (block.line - 1) + block.code, os.path.abspath(path), "exec")
        try:
            exec(code, module.__dict__)
        except BaseException as e:
            why = skip_reason(e)
            if why is not None:  # an optional library really missing: the page cannot run here
                result.update(status="skipped", line=block.line, reason=f"{shown}:{block.line} and after: {why}")
                break
            sys.stdout.flush()
            print(f"\n{shown}: the block at line {block.line} failed:", file=sys.stderr)
            traceback.print_exc()
            result.update(status="failed", line=block.line)
            break
        result["ran"] += 1
    with open(result_path, "w", encoding="utf-8") as f:
        json.dump(result, f)
    return 1 if result["status"] == "failed" else 0


if __name__ == "__main__":
    sys.exit(main())
