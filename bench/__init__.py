"""Benchmark suite for codemode: ``python -m bench`` prints the figures and writes ``bench/results.json``."""
