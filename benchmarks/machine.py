"""Facts about the machine a benchmark ran on (shared by the scripts in benchmarks/)."""
import platform


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (or what platform reports)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"
