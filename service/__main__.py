"""`python -m service`: the `mneme` command line."""

from service.cli import main

raise SystemExit(main())
