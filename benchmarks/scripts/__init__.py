"""Stand-alone measurements run from a checkout (`python -m benchmarks.scripts.<name>`), beside
the `mneme bench` commands: the local embedder's speed, what tracing and the service add to a
search, two code versions' fusion statements replayed side by side, the data-lifecycle costs and
the facts evaluation.

Unlike the rest of `benchmarks`, they are not installed with the package: the facts evaluation
answers with the tests' fake OpenAI-compatible server and the tracing benchmark exports to the
tests' OTLP receiver, so they need the repository's `tests` package beside them. They print
numbers and assert nothing.
"""
