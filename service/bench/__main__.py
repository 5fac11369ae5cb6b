"""`python -m service.bench retrieval …`: the benchmarks without the `mneme` entry point."""

from service.bench.cli import main

raise SystemExit(main())
