"""A benchmark script of benchmarks/ as a module, so that tests call its functions (the scripts
are files to run, not a package)."""
import importlib.util
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def bench_script(name: str):
    """benchmarks/<name>.py loaded as a module named `name`."""
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
