"""Benchmarks, run as modules from the repository root: ``python -m bench.bench_rl`` and so on."""
