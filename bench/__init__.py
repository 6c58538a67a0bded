"""Benchmark scripts, run as ``python bench/<script>.py``; see bench/README.md."""
