"""The one benchmark harness, behind `hybridsearch bench` and the scripts in benchmarks/.

Data: vectors (generators, ground truth, filters, file readers), corpora (the product catalogue,
judged collections). Measuring: machine (facts recorded with every result), metrics, timing,
concurrency. The compared libraries: adapters/. What runs: workloads/. Output: report, plots,
tables. Running: cli (`hybridsearch bench`), script (what the scripts share), child (a row in a
fresh process). docs/harness.md maps it."""
