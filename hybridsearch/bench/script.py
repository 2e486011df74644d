"""What every script in benchmarks/ shares: its common options (--quick, --n, --queries, --out)
and its first lines (the machine, the command), so that a script is its own options, one call
into hybridsearch.bench and the ratios it prints."""
from __future__ import annotations

import argparse
import shlex
import sys

from hybridsearch.bench.machine import describe, machine_facts
from hybridsearch.bench.tables import Output


def parser(doc: str, full: tuple | None = None, quick: tuple | None = None,
           what: str = "vectors") -> argparse.ArgumentParser:
    """An ArgumentParser described by the script's docstring, with --out DIR, and with --n and
    --queries when the script has a `full` (n, queries) size (plus --quick for a `quick` one)."""
    p = argparse.ArgumentParser(description=doc.strip().splitlines()[0], epilog=doc,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    if quick:
        p.add_argument("--quick", action="store_true", help=f"{quick[0]:,} {what} and {quick[1]:,} queries "
                                                            f"(default {full[0]:,} / {full[1]:,})")
    if full:
        p.add_argument("--n", type=int, help=f"{what} (default {full[0]:,})")
        p.add_argument("--queries", type=int, help=f"timed queries (default {full[1]:,})")
    p.add_argument("--out", metavar="DIR", help="also write NAME.txt and NAME.json into DIR (nothing is written "
                                                "without it)")
    p.set_defaults(full=full, quick_size=quick)
    return p


def sizes(args) -> tuple:
    """(n, queries) from --n / --queries, else the quick or the full size."""
    base = args.quick_size if getattr(args, "quick", False) else args.full
    return args.n or base[0], args.queries or base[1]


def start(name: str, args) -> tuple:
    """(Output, machine facts) of a script run; the first lines say the machine and the command."""
    out = Output(args.out, name)
    facts = machine_facts()
    out.say(f"machine: {describe(facts)}")
    out.say(f"command: {shlex.join([sys.executable] + sys.argv)}")
    return out, facts
