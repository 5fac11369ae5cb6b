"""Benchmarks that drive the real service through its HTTP API (`mneme bench …`).

Benchmark data is read from where it lives (e.g. ../shared/bench/locomo10.json), never copied
into this repository: LoCoMo is CC BY-NC, for evaluation only.
"""
