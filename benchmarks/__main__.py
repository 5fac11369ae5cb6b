"""`python -m benchmarks retrieval …`: the benchmarks without the `mneme` entry point."""

from benchmarks.cli import main

raise SystemExit(main())
