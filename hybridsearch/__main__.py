"""`python -m hybridsearch bench ...`: the benchmark runner (hybridsearch.bench.cli)."""
import sys

from hybridsearch.bench.cli import main

sys.exit(main())
