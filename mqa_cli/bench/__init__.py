"""Benchmarks: suites of timed calls (the public API or the kernel alone), the timing methods, plots and
the indexer suite."""
