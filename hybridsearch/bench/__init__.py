"""The benchmark harness behind `hybridsearch bench`: datasets, metrics, workloads, report."""
