"""The facts recorded with every benchmark result: CPU model, cores, SIMD level, date, versions."""
from __future__ import annotations

import datetime
import importlib.metadata as md
import os
import platform

# distributions whose versions a result records when they are installed
PACKAGES = ("hybridsearch", "numpy", "hnswlib", "faiss-cpu", "annlite", "bm25s", "PyStemmer", "tantivy",
            "sqlite-vec", "elasticsearch", "opensearch-py", "threadpoolctl", "pytest-benchmark")


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (or what platform reports, or "unknown")."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def versions(packages=PACKAGES) -> dict:
    """distribution -> installed version, for those of `packages` that are installed."""
    out = {}
    for pkg in packages:
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            pass
    return out


def simd() -> str:
    """The SIMD level our kernels dispatch to here (hybridsearch.engine.exact.simd_level)."""
    try:
        from hybridsearch.engine.exact import simd_level
        return simd_level()
    except ImportError:  # an unbuilt checkout
        return "unknown"


def threadpools() -> list:
    """The BLAS / OpenMP thread pools loaded in this process (empty without threadpoolctl)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return []
    return sorted({f"{p.get('internal_api')} {p.get('version') or ''}".strip() + f" ({p.get('num_threads')} threads)"
                   for p in threadpool_info()})


def machine_facts() -> dict:
    """Everything above as one dict: cpu, cores, cores_available, simd, python, platform, date,
    versions, threadpools."""
    available = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"cpu": cpu_model(), "cores": os.cpu_count(), "cores_available": available, "simd": simd(),
            "python": platform.python_version(), "platform": platform.platform(),
            "date": datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
            "versions": versions(), "threadpools": threadpools()}


def describe(facts: dict) -> str:
    """One line for a report or a terminal: CPU, cores, SIMD, Python, date and versions."""
    vs = ", ".join(f"{k} {v}" for k, v in facts.get("versions", {}).items())
    return (f"{facts['cpu']}, {facts['cores']} cores ({facts.get('cores_available', '?')} available), "
            f"SIMD {facts.get('simd', '?')}, Python {facts['python']}, {facts.get('date', '?')}"
            + (f"; {vs}" if vs else ""))
