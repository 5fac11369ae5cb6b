"""Benchmarks that drive the real service through its HTTP API (`mneme bench …`).

A package of its own beside `service`, installed with the `bench` extra
(`pip install -e '.[bench]'`); the service never imports it. Benchmark data is read from where
it lives (by default ../shared/bench/locomo10.json beside the project), never copied into this
repository: LoCoMo is CC BY-NC 4.0, for evaluation only.
"""
